"""keel's core: types, events, the turn engine. Knows nothing of CLI, UI, storage or hooks."""
