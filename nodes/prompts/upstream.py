"""The upstream profile's prompts: WebGen-Agent's information content, in this project's words.

A run given ``prompts_from`` sends WebGen-Agent's own texts instead, read from the user's checkout
(core/prompt_checkout.py; nodes/profile.py ``checkout_set``).
"""

from __future__ import annotations

from collections.abc import Iterable

from webgen_agent.nodes.prompts.common import LOGIN_EMAIL, LOGIN_PASSWORD, LOGIN_USERNAME, pages_note

# Purpose: the coder's system prompt of the upstream profile (what bolt.diy's prompt tells the coder).
UPSTREAM_CODER_SYSTEM = """You are Bolt, a senior software developer and expert assistant who knows many
languages, frameworks and good practices.

Where your code runs: a WebContainer, a Node.js runtime emulated inside the browser with a
zsh-like shell. It cannot run native binaries or compile C/C++ (no g++); python and python3 exist
but only with the standard library (no pip, no third-party modules, not even standard modules that
need system libraries such as curses); git is not available; diff and patch editing are
impossible, so files are always written whole. A web server needs an npm package (Vite preferred,
or servor, serve, http-server) or Node's own APIs; prefer Vite to a hand-written server. Prefer
Node.js scripts to shell scripts. Prefer databases and packages without native code (libsql,
sqlite). The shell offers the usual file commands (cat, cp, ls, mkdir, mv, rm, rmdir, touch),
system information (hostname, ps, pwd, uptime, env), node, python3, jq, curl and similar tools.
The working directory is the project's root; every path you write is relative to it.

Indent code with 2 spaces. Answer in plain markdown; use no HTML tags except the artifact tags.

Plan first. Before the code, outline in two to four short lines what you will do: the concrete
steps, the main components, the difficulties you expect. For example:
- asked for a to-do list that survives a reload: "I will: 1. set up Vite and React; 2. write
  TodoList and TodoItem components; 3. keep the items in localStorage; 4. add adding, editing and
  deleting." and then the rest of the answer;
- asked why API calls fail: "First I will: 1. look at the network requests; 2. check the endpoint
  format; 3. read the error handling." and then the rest of the answer.

How to answer with code:
1. Think the whole project through before writing: every file that is needed, every earlier
   change (always edit the latest version of a file), the dependencies, and what a change
   breaks elsewhere.
2. Put everything in one <boltArtifact id="kebab-case-id" title="Title"> (reuse the id when you
   update the project), holding <boltAction> tags in the order they must run (a file must exist
   before a shell command that uses it):
   - <boltAction type="file" filePath="relative/path">the whole file</boltAction> creates or
     replaces a file;
   - <boltAction type="shell">command</boltAction> runs a shell command (use --yes with npx, join
     commands with &&; never start a dev server with it);
   - <boltAction type="start">npm run dev</boltAction> starts the dev server, only when it is not
     running yet or new dependencies were added; a running server picks up file changes itself.
3. Write package.json first, with every dependency in it, rather than installing packages one by
   one.
4. Always give the complete, updated content of every file you write: never placeholders such as
   "// rest of the code remains the same", never truncation or summaries.
5. Split the code into small modules joined by imports; keep it clean, readable and consistently
   named.
6. If a login is required, predefine a user with username "admin" and password "admin123456"
   (and email "admin@example.com" if an email is required).
7. Never say "artifact" in your prose ("We set up a snake game", not "This artifact sets up a
   snake game"), never tell the user to open a preview URL, do not explain unless asked: reply
   first with the artifact that sets the whole project up.

Worked examples (file contents shortened here to "..."; yours are always whole):
- "Write a JavaScript function for the factorial of a number": one sentence, then an artifact
  with id "factorial-function": a file action index.js holding the function, then a shell
  action `node index.js`.
- "Build a snake game": one sentence, then an artifact with id "snake-game": a file action
  package.json (name "snake", scripts.dev "vite"), a shell action `npm install --save-dev vite`,
  a file action index.html holding the game, and a start action `npm run dev`; then one short
  paragraph on how to play.
- "Make a bouncing ball with real gravity in React": one sentence, then an artifact with id
  "bouncing-ball-react": a file action package.json (private, type "module", scripts dev "vite",
  build "vite build", preview "vite preview"; dependencies react, react-dom and react-spring;
  devDependencies @types/react, @types/react-dom, @vitejs/plugin-react and vite), file actions
  index.html, src/main.jsx, src/index.css and src/App.jsx, and a start action `npm run dev`;
  then one sentence on what the page shows."""

# Purpose: the upstream profile's request for one GUI-agent test instruction from the requirement.
UPSTREAM_TEST_INSTRUCTION_USER = """From the website development instruction below, work out what the website
must do and look like, and write one instruction for a web-navigation GUI agent that tests the
generated website. For example, for a self-driving tour site with cream background and dark-teal
components, the test instruction is: "Verify cream background and dark-teal buttons. Browse
different types of self-driving tour routes, book hotels and packages, and query self-driving club
information. Search and filter for self-driving tour products."

The website development instruction:

{requirement}

Write the test instruction only, with no other comments."""

# Purpose: appended to the upstream GUI test instruction: the shared login and the answer format.
UPSTREAM_TEST_SUFFIX = f"""

When the site asks for a username, a password or an email while you test, enter "{LOGIN_USERNAME}",
"{LOGIN_PASSWORD}" and "{LOGIN_EMAIL}".

Answer with one of:
- YES: the testing instruction was fully achieved while you interacted with the site.
- NO: the testing instruction was not achieved at all.
Base your final answer on what you experienced while testing."""

# Purpose: upstream profile: the GUI agent's last iteration, where it must answer (WebVoyager's limit prompt).
UPSTREAM_GUI_LIMIT = """You have used up the interactions you were allowed with the website.

Judge how your attempts went against the testing instruction:

Testing instruction: {instruction}

Answer with one of:
- YES: the testing instruction was fully achieved while you interacted with the site.
- NO: the testing instruction was not achieved at all.
Base your final answer on what you experienced while testing."""

# Purpose: upstream profile, first VLM call: errors, description and suggestions from the screenshot alone.
UPSTREAM_DESCRIBE_USER = """You get one screenshot of a website.

1. Look closely for rendering or runtime errors (such as "404 Not Found", stack traces, missing
   styles, blank areas) and decide whether the screenshot shows one.
   - If it does: is_error true, the visible error message(s) in error_message (quoted or
     paraphrased), screenshot_description empty.
   - If not: is_error false, error_message empty, and a concise but thorough
     screenshot_description: overall layout (header, sidebar, footer, grid, columns), key UI
     components (navigation, buttons, forms, images, cards, tables, modals), colour scheme and
     style, the visible text and data, and notable design details (icons, spacing, fonts).
2. Suggest how the appearance could improve (for example: separate overlapping components,
   fill large blank areas, fix text whose colour is too close to its background) in
   suggestions, briefly; leave it empty when nothing needs improving.

Answer with the JSON object only."""

# Purpose: upstream profile, second VLM call: the 0-5 appearance grade from the screenshot alone.
UPSTREAM_GRADE_USER = """Grade the appearance of the webpage in the screenshot from 0 to 5 (5 is best), on four
criteria:
- Rendering: does the page show components at all, render without visual errors, with colours,
  fonts and components as intended?
- Content relevance: does the design suit the site's purpose, with elements (search bars, report
  formats, ...) placed logically and working?
- Layout harmony: are text, images and buttons arranged in a balanced, intuitive, uncluttered way?
- Modernness and beauty: does it follow current design trends, with pleasing colours, typography
  and visual hierarchy?

Scale:
0 blank: nothing visible, only a background colour or an error message;
1 poor: major rendering problems, irrelevant or missing content, chaotic layout, dated look;
2 below average: partial rendering with visible errors, loosely organised, inconsistent, basic;
3 average: mostly correct with small flaws, relevant but unpolished, functional but plain;
4 good: renders well, relevant and well organised, harmonious, modern and appealing;
5 excellent: flawless, highly relevant and intuitive, polished and innovative, memorable.

Write a short analysis of a few sentences (strengths, weaknesses), then the grade."""

# Purpose: upstream profile: the feedback model summarises a GUI-agent run into suggestions and a grade.
UPSTREAM_GUI_SUMMARY_USER = """A GUI agent tested a website.

GUI-agent test instruction:
{instruction}

What the agent did (its messages, in order):
{trajectory}

1. Look for failed actions that point to a problem in the website.
2. passed: true when the run shows the website working as the instruction asks; otherwise false,
   with concise but thorough suggestions that fix the problems the run revealed (leave them empty
   when it passed).
3. grade, one integer from 1 to 5: 1 the vast majority of the tested functions fail; 2 many fail,
   a few work; 3 about half work; 4 most work, only minor issues; 5 everything works as expected.

You may write a short analysis of two or three sentences first, then the JSON object."""

# Purpose: upstream profile feedback: the sentences the coder reads after a step (no grades).
UPSTREAM_FEEDBACK = {
    "install_ok": "The dependencies installed without errors.",
    "install_failed": "**Installing the dependencies reported errors:**",
    "start_ok": "The service started without errors.",
    "start_failed": "**Starting the service reported errors:**",
    "no_screenshot": "Taking a screenshot of the started website failed:",
    "visible_error": "**The screenshot shows errors:**",
    "description": "**What the screenshot shows:**",
    "suggestions": "**Suggestions for improvement:**",
    "no_description": "The screenshot could not be described, nor its errors read.",
    "gui_error": "The GUI agent hit an error while navigating the website:",
    "gui_suggestions": "**Suggestions from the GUI-agent test:**",
    "gui_ok": "The GUI-agent test succeeded; nothing more needs improving.",
    "no_gui_summary": "The GUI-agent test could not be summarised, nor its errors read.",
    "command_failed": "The command `{command}` failed.",
    "service_failed": "The service reported errors while starting.",
    "fix": "Change the code to fix the errors in {stages}.",
    "ask_validated": (
        "Look at the feedback above and decide whether the code needs more changes given the screenshot. "
        'If it needs none, reply <boltAction type="screenshot_validated"/> to say the screenshot is '
        "satisfactory; otherwise keep changing the code until the requirements are met. IMPORTANT: when "
        "you change the code, do not send a signal."
    ),
    "ask_finish": (
        "Look at the feedback above and decide whether the code needs more changes given the GUI-agent "
        'test. If it needs none, reply <boltAction type="finish"/> to say the task is done; otherwise '
        "keep changing the code until the requirements are met. IMPORTANT: when you change the code, do "
        "not send the finish signal."
    ),
    "instruction": "**The instruction for the website you are building:**",
    "reminder": (
        "CRITICAL: when you create or change a file, always give its FULL, updated content:\n"
        "- include ALL of its code, also the unchanged parts;\n"
        '- NEVER use placeholders such as "// rest of the code remains the same...";\n'
        "- never truncate or summarise a file."
    ),
}


# Purpose: the task given to the browser-use GUI agent (upstream profile: the page is not marked).
UPSTREAM_GUI_TASK = """You are testing a website at {url}. Do not leave this site.

{instruction}

When you are done, give your final answer starting with YES (everything worked) or NO (something
failed), followed by what you observed."""


def upstream_gui_task(url: str, instruction: str, pages: Iterable[str] = ()) -> str:
    note = pages_note(pages)
    return UPSTREAM_GUI_TASK.format(
        url=url, instruction=f"{note}\n\n{instruction.strip()}" if note else instruction.strip()
    )


def upstream_test_instruction_user(requirement: str) -> str:
    return UPSTREAM_TEST_INSTRUCTION_USER.format(requirement=requirement.strip())


def upstream_gui_limit(instruction: str) -> str:
    return UPSTREAM_GUI_LIMIT.format(instruction=instruction.strip())


def upstream_gui_summary_user(instruction: str, trajectory: Iterable[str]) -> str:
    return UPSTREAM_GUI_SUMMARY_USER.format(
        instruction=instruction.strip(), trajectory="\n\n".join(trajectory) or "(nothing)"
    )
