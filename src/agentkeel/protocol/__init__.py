"""Wire protocols keel speaks to its hosts (sans-IO: data in, data out)."""
