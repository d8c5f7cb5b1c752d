"""Prompts, as data. Each constant has a one-line purpose; builders are pure functions."""

from __future__ import annotations

from collections.abc import Iterable

# Purpose: tell the coder model how to write a project in the bolt edit format.
CODER_SYSTEM = """You are an expert front-end engineer who builds complete, working websites.

Write the project as one <boltArtifact> that holds whole files:

<boltArtifact id="short-id" title="Short title">
<boltAction type="file" filePath="package.json">...the whole file...</boltAction>
<boltAction type="file" filePath="src/App.jsx">...the whole file...</boltAction>
</boltArtifact>

Rules:
- Prefer Vite + React (package.json with a "dev" script running vite, index.html, src/main.jsx,
  src/App.jsx, CSS files). A plain static site (index.html + CSS + JS, no package.json) is fine too.
- Always write every changed file whole; never elide code with comments such as "rest unchanged".
- Paths are relative to the project root. No absolute paths, no "..".
- Keep data in memory or localStorage; there is no backend. Use realistic sample data.
- Make every required function really work from the UI, and make it look modern and tidy.
- <boltAction type="shell">command</boltAction> runs a command in the project folder only when
  the user allowed shell commands; dependencies are installed for you from package.json.

After your edit the site is installed, started, screenshotted and tested, and you get feedback.
Then reply with one of:
- another <boltArtifact> with the files to change;
- the single word screenshot_validated, when the appearance feedback is wrong or satisfied and you
  want the functions tested by a GUI agent now;
- the single word finish, when the website is complete."""

# Purpose: the first user turn: the requirement to build.
GENERATOR_USER = """Build this website:

{requirement}"""

# Purpose: system prompt of the VLM grading the landing-page screenshot.
JUDGE_SYSTEM = """You grade the landing page of a freshly generated website from its screenshot.
Describe what you see, then grade it:
5 polished, complete and modern; 4 good with small flaws; 3 acceptable but plain or partly off;
2 poor: broken layout, missing main content or unrelated to the requirement; 1 almost nothing useful.
Give concrete suggestions a developer can act on (layout, colours, missing sections)."""

# Purpose: the judge's user turn: requirement, visible text, then the image.
JUDGE_USER = """Requirement of the website:
{requirement}

Text visible on the page (for reference; judge what the screenshot shows):
{visible_text}"""

# Purpose: ask the feedback model for one GUI test covering the required functions.
TEST_INSTRUCTION_USER = """A website was built for this requirement:

{requirement}

Write ONE test instruction for a browser agent that checks every function the requirement asks
for, as concrete steps (what to click, what to type, what should appear). If a login is needed,
use the username "demo" and password "demo123". End with: "Answer YES if everything worked,
otherwise NO and what failed." """

# Purpose: the task given to the browser-use GUI agent.
GUI_TASK = """You are testing a website at {url}. Do not leave this site.

{instruction}

When you are done, give your final answer starting with YES (everything worked) or NO (something
failed), followed by what you observed."""

# Purpose: turn the GUI agent's run into a verdict (note: pass means the functions worked).
GUI_VERDICT_USER = """A browser agent tested a website built for this requirement:
{requirement}

Test instruction:
{instruction}

Actions the agent took:
{actions}

Agent's final answer: {final_answer}
Run ended because: {stopped_reason}

Decide whether the website PASSED (the required functions worked as described; an agent that ran
out of actions on a working site may still pass) and grade its functionality 1-5. Suggest code fixes
for anything that did not work."""

# Purpose: the llm Critic's request for a requirement-by-requirement diagnosis.
CRITIC_LLM_USER = """You review a website generated for this requirement:
{requirement}

Results of the latest step:
{results}

Check every requirement one by one (met / partly / unmet, with evidence from the results), find the
root cause of what is wrong, and give an ordered repair plan of concrete code changes."""

# Purpose: tell the coder it was rolled back after repeated failures.
BACKTRACK_NOTE = """The last {count} steps all failed, so the project was rolled back to step {target}
(screenshot {screenshot}/5, GUI {gui}/5), which worked best. Do not repeat the approach of the failed
steps; improve step {target}'s code instead."""

# Purpose: reminder appended to every feedback message.
WHOLE_FILES_REMINDER = "Reply with a <boltArtifact> of whole files to fix this, or with screenshot_validated or finish."


def generator_user(requirement: str) -> str:
    return GENERATOR_USER.format(requirement=requirement.strip())


def judge_user(requirement: str, visible_text: str) -> str:
    return JUDGE_USER.format(requirement=requirement.strip(), visible_text=visible_text.strip() or "(none)")


def test_instruction_user(requirement: str) -> str:
    return TEST_INSTRUCTION_USER.format(requirement=requirement.strip())


def gui_task(url: str, instruction: str) -> str:
    return GUI_TASK.format(url=url, instruction=instruction.strip())


def gui_verdict_user(
    requirement: str, instruction: str, actions: Iterable[str], final_answer: str | None, stopped_reason: str
) -> str:
    return GUI_VERDICT_USER.format(
        requirement=requirement.strip(),
        instruction=instruction.strip(),
        actions=numbered_list(actions),
        final_answer=final_answer or "(none)",
        stopped_reason=stopped_reason,
    )


def critic_llm_user(requirement: str, results: str) -> str:
    return CRITIC_LLM_USER.format(requirement=requirement.strip(), results=results.strip())


def numbered_list(items: Iterable[str]) -> str:
    """A GUI agent's actions as "1. ..." lines, for the models that judge a run."""
    return "\n".join(f"{n}. {item}" for n, item in enumerate(items, 1)) or "(none)"


def bullet_list(items: Iterable[str]) -> str:
    return "\n".join(f"- {item}" for item in items) or "- (none)"
