"""Reports: read result tables, never compute them."""
