"""keel's own loop extensions, registered by name (the defaults are plugins too).

``builtins.default_extensions`` builds the list a session starts with; ``disabled_hooks`` in
settings removes entries by name; SDK callers add their own through ``RuntimeOptions.extensions``.
The reliability layer and the hooks dispatcher will live here.
"""
