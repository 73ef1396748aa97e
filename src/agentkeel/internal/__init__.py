"""Small mechanisms every domain shares, each kept once: frontmatter, globs, git, subprocesses,
compact JSON, keel's home directory and its environment variables. Imports nothing of keel but
``core``."""
