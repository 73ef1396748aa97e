"""keel's Python SDK (placeholder; filled in below)."""
