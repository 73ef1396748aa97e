"""The memory tools' names, once: the tools (memory/tools.py), their lazy stand-ins and memory
capture (which does not record its own searches) read them here, without importing the tools."""

SEARCH, TIMELINE, GET = "MemorySearch", "MemoryTimeline", "MemoryGet"
MEMORY_TOOLS = (SEARCH, TIMELINE, GET)
