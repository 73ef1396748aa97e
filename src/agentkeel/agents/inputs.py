"""Input models of the agent tools (pydantic: imported at the first call only)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class TaskInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    description: str = Field(default="", description="A short (3-5 word) description of the task")
    prompt: str = Field(min_length=1, description="The task for the agent to perform")
    subagent_type: str = Field(default="general-purpose", description="The type of specialized agent to use")
    model: str | None = None
    run_in_background: bool = False


class SkillInput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    skill: str = Field(min_length=1, description='The skill name, e.g. "pdf" or "ms-office-suite:pdf"')
    args: str = Field(default="", description="Optional arguments for the skill")
