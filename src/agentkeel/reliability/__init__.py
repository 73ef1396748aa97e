"""The reliability layer (SPEC section 5): named built-ins that prevent, detect and recover.

Each module holds one handler or one small family; each handler is an
:class:`~agentkeel.core.extensions.Extension` registered by name in
:mod:`agentkeel.app.extensions` (so ``disabled_hooks`` can switch it off), names the failure
it exists for in its docstring, and tells the user what it did with a ``Notice`` on the bus.
They share one :class:`~agentkeel.reliability.state.ReliabilityState` per session
(a service), which is how session recovery and the todo-continuation enforcer never fight.

Prevention: thinking-block-validator, empty-message-sanitizer, tool-pairing-validator (messages),
non-interactive-env (shell), comment-checker (comments). Detection: context-window-monitor
(monitor), error-pattern-detector (errors). Recovery: session-recovery (recovery),
todo-continuation-enforcer (todo), model-fallback (fallback). Context: tool-output-truncator
(monitor), dynamic-context-pruning (pruning).
"""
