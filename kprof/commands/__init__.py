"""One library function per command: returns data that tests check without a terminal."""
