"""Context management (SPEC section 6): token accounting, compaction, the working state that
survives it, instruction files and rules, the sectioned system prompt and output styles.

Nothing here is imported by ``core``: the package plugs into the loop through one extension
(``fit_context``, ``before_request``, ``after_response``, ``after_tool``) and the event bus, and is
reached by the CLI and the SDK through the session's services (:class:`ContextManager`).
"""
