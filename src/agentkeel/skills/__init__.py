"""Skills: ``SKILL.md`` folders the model loads on demand (the ``Skill`` tool) or the user runs (``/name``)."""

from agentkeel.skills.loader import Skill, SkillCatalog, load_skills

__all__ = ["Skill", "SkillCatalog", "load_skills"]
