"""Git revisions as legs: which commits a range holds, the tree of each revision (or of a revision
with one commit added or reverted) materialised in a cache, and the legs a design needs."""
