"""A corpus of coder replies written to break the agent, grouped into runs (one reply per coder turn).

Each case names what a user relies on when the reply comes back: the message the model (or the user)
gets, and what must not happen. ``tests/test_hostile_corpus.py`` replays each group through the
scripted model server in one real run and checks every case. ``{secret}`` in a reply is replaced by
the path of a secret file planted in the home folder for the test.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

PAGE = '<boltAction type="file" filePath="index.html"><!doctype html><html><body><h1>Corpus page</h1></body></html></boltAction>'


@dataclass(frozen=True)
class Case:
    name: str
    reply: str
    expect: tuple[str, ...] = ()  # each must appear in the feedback the coder gets after this step


def edit(*actions: str, page: bool = True) -> str:
    body = "\n".join([PAGE, *actions] if page else actions)
    return f'<boltArtifact id="corpus" title="Corpus">\n{body}\n</boltArtifact>'


def file(path: str, content: str = "x") -> str:
    return f'<boltAction type="file" filePath="{path}">{content}</boltAction>'


def shell(command: str) -> str:
    return f'<boltAction type="shell">{command}</boltAction>'


def _marker(scripts: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(scripts).encode()).hexdigest()[:12]


def package(scripts: dict[str, str]) -> str:
    """A package.json without dependencies; its own ``overrides`` entry makes each one a new install."""
    manifest = {"name": "corpus", "private": True, "scripts": scripts, "overrides": {"corpus-marker": _marker(scripts)}}
    return file("package.json", json.dumps(manifest))


SERVER_JS = (
    "require('http').createServer((q, s) => { s.setHeader('content-type', 'text/html'); "
    "s.end('<h1>Served</h1>'); }).listen(Number(process.env.PORT), '{host}', () => console.log('listening'));"
)

# Static site, shell actions allowed: paths, symlinks, devices, sizes, odd bytes and tags.
FILES = [
    Case("baseline page", edit(), ()),
    Case(
        "unicode look-alike separators and dots",
        edit(file("\u2024\u2024/escape.txt"), file("src\uff0f..\uff0fx.txt"), file("src/\u202egpj.js")),
        ("look-alike or control characters",),
    ),
    Case(
        "'..' in every position",
        edit(
            file("../a.txt"),
            file("src/../../b.txt"),
            file("src/.."),
            file("./../c.txt"),
            file("a/b/../../../d.txt"),
            file("..\\e.txt"),
            file("src/..\\..\\f.txt"),
        ),
        ("'..' would leave the project folder",),
    ),
    Case(
        "absolute paths",
        edit(file("/tmp/webgen-corpus-abs.txt"), file("~/webgen-corpus-home.txt"), file("C:\\webgen.txt")),
        ("absolute paths are not allowed",),
    ),
    Case(
        "symlinks, a device link and a FIFO made by a shell action",
        edit(shell("ln -s / rootlink && ln -s {secret} leak.txt && ln -s /dev/zero zero.js && mkfifo pipe.txt")),
        (),
    ),
    Case(
        "writes through those symlinks",
        edit(file("rootlink/tmp/webgen-corpus-through.txt"), file("leak.txt", "overwritten")),
        ("is a symlink; writing through it is refused",),
    ),
    Case(
        "hardlinks to files outside the workspace",
        edit(shell("ln {secret} hard.txt; ln /etc/hostname host.txt")),
        ("failed",),
    ),
    Case("a device node", edit(shell("mknod dev0 c 1 3")), ("Operation not permitted",)),
    Case(
        "NUL bytes in a path and in content",
        edit(file("a\x00b.txt"), file("nul.txt", "before\x00after")),
        ("empty or invalid path", "NUL bytes"),
    ),
    Case(
        "binary content (unpaired surrogates)",
        edit(file("bin.txt", "\udcff\udcfe binary")),
        ("unpaired UTF-16 surrogates",),
    ),
    Case(
        "writes into node_modules and .git",
        edit(file("node_modules/react/index.js"), file(".git/config")),
        ("managed by the tools",),
    ),
    Case(
        "a shell action that writes outside and reads a secret",
        edit(shell("echo x > /tmp/webgen-corpus-shell; echo x > ~/webgen-corpus-shell; cat {secret}")),
        ("No such file or directory",),
    ),
    Case("a shell action that loops forever", edit(shell("while :; do :; done")), ("was stopped",)),
    Case("a shell action that fork-bombs", edit(shell("bomb() { bomb | bomb & }; bomb; sleep 1")), ()),
    Case(
        "deeply nested tags",
        edit(file("nested.html", "<div>" * 20000 + "deep" + "</div>" * 20000)) + "<boltArtifact>" * 5000,
        (),
    ),
    Case(
        "unterminated tags",
        '<boltArtifact id="x" title="x"><boltAction type="file" filePath="index.html"><h1>cut off',
        (),
    ),
    Case("a 10 MB file", edit(file("big.txt", "y" * 10_000_000)), ("over the 2 MB limit for one file",)),
    Case("a 10 MB reply of prose", "z" * 10_000_000, ()),
    Case(
        "a shell action that fills the workspace",
        edit(shell("head -c 40000000 /dev/zero > fill.bin")),
        ("over the 32 MB cap",),
    ),
]

# npm projects without dependencies: lifecycle scripts and dev scripts that misbehave.
NPM = [
    Case(
        "postinstall writes outside and reads a secret",
        edit(
            package({"postinstall": "node post.js", "dev": "node server.js"}),
            file(
                "post.js",
                "const fs = require('fs'), os = require('os');"
                "for (const p of ['/tmp/webgen-corpus-post', os.homedir() + '/webgen-corpus-post']) "
                "{ try { fs.writeFileSync(p, 'x') } catch (e) {} }"
                "let s = 'unreadable'; try { s = fs.readFileSync('{secret}', 'utf8') } catch (e) {}"
                "fs.writeFileSync('stolen.txt', s);",
            ),
            file("server.js", SERVER_JS.replace("{host}", "127.0.0.1")),
        ),
        (),
    ),
    Case(
        "preinstall fails",
        edit(package({"preinstall": "echo cannot build the native addon && exit 3", "dev": "node server.js"})),
        ("`npm install` failed", "cannot build the native addon"),
    ),
    Case(
        "postinstall plants a symlink to /",
        edit(package({"postinstall": "ln -s / escape", "dev": "node server.js"})),
        (),
    ),
    Case("a write through the planted symlink", edit(file("escape/tmp/webgen-corpus-b.txt")), ("is a symlink",)),
    Case(
        "a dev script that fork-bombs",
        edit(package({"dev": "bash -c 'b() { b | b & }; b; sleep 100'"})),
        ("did not answer HTTP",),
    ),
    Case("a dev script that loops forever", edit(package({"dev": "node -e 'for(;;){}'"})), ("did not answer HTTP",)),
    Case(
        "a dev script that never listens",
        edit(package({"dev": "node -e 'setInterval(() => {}, 1000)'"})),
        ("did not answer HTTP",),
    ),
    Case(
        "a dev server on another port that says so",
        edit(
            package({"dev": "node other.js"}),
            file(
                "other.js",
                "const srv = require('http').createServer((q, s) => { s.setHeader('content-type', 'text/html');"
                " s.end('<h1>Elsewhere</h1>'); });"
                "srv.listen(0, '127.0.0.1', () => console.log('Local: http://127.0.0.1:' + srv.address().port + '/'));",
            ),
        ),
        (),
    ),
    Case(
        "a dev server on 0.0.0.0",
        edit(package({"dev": "node server.js"}), file("server.js", SERVER_JS.replace("{host}", "0.0.0.0"))),
        (),
    ),
    Case(
        "a fake Local: URL pointing at another service",
        edit(package({"dev": "node -e \"console.log('  Local:   {other}'); setInterval(() => {}, 1000)\""})),
        ("did not answer HTTP",),
    ),
    Case(
        "a dev script that exits at once",
        edit(package({"dev": "node -e \"console.error('boom'); process.exit(7)\""})),
        ("exited with code",),
    ),
    # Last of its group: the files it leaves keep the workspace over the cap (the group runs at 32 MB).
    Case(
        "postinstall fills the workspace past its size cap",
        edit(
            package(
                {
                    "postinstall": "for i in 1 2 3 4; do head -c 10000000 /dev/zero > fill$i.bin; done",
                    "dev": "node server.js",
                }
            ),
            file("server.js", SERVER_JS.replace("{host}", "127.0.0.1")),
        ),
        ("over the 32 MB cap",),
    ),
]


def page(script: str, body: str = "<h1>Hostile page</h1>") -> str:
    html = f"<!doctype html><html><body>{body}<script>{script}</script></body></html>"
    return f'<boltArtifact id="p" title="p">{file("index.html", html)}</boltArtifact>'


# Static pages whose script misbehaves in the browser during the capture.
PAGES = [
    Case("a page that loops forever", page("for (;;) {}"), ("did not finish loading",)),
    Case("endless dialogs", page("setInterval(() => alert('again'), 20)"), ()),
    Case("endless popups", page("setInterval(() => window.open('/?popup=' + Date.now()), 20)"), ()),
    Case(
        "endless downloads",
        page(
            "setInterval(() => { const a = document.createElement('a');"
            " a.href = URL.createObjectURL(new Blob(['payload'])); a.download = 'webgen-corpus-download.txt';"
            " document.body.appendChild(a); a.click(); }, 50)"
        ),
        (),
    ),
    Case(
        "a page that navigates to file://", page("setTimeout(() => { location.href = 'file:///etc/passwd' }, 50)"), ()
    ),
    Case(
        "a page that navigates to an external host",
        page("setTimeout(() => { location.href = 'http://example.com/' }, 50)"),
        ("navigated away from the site",),
    ),
    Case(
        "a page that reaches for other origins",
        page("fetch('{other}').catch(() => {}); fetch('http://example.com/x').catch(() => {})", "<h1>Fetching</h1>"),
        (),
    ),
    Case("a page that closes its window", page("setTimeout(() => window.close(), 50)"), ()),
]


# Two-step poisoning of the shared dependency cache. Step 0 is not shareable (a root postinstall and
# one more dependency), so its scripts run: it appends code to react's entry file and deletes the
# lockfile. Step 1 is the honest project, whose package.json an unrelated honest run writes byte for
# byte (HONEST_REPLY): npm used to install it over step 0's tree, keep the rewritten file, and the
# tree went into the shared cache, where the honest run restored it.
PLANTED = "webgen-corpus-planted"
HONEST_PACKAGE = {
    "name": "corpus-honest",
    "private": True,
    "version": "0.0.0",
    "scripts": {"dev": "node server.js"},
    "dependencies": {"react": "18.3.1"},
}
HONEST_REPLY = edit(
    file("package.json", json.dumps(HONEST_PACKAGE, indent=2)),
    file("server.js", SERVER_JS.replace("{host}", "127.0.0.1")),
)
CACHE_POISON = [
    Case(
        "a postinstall rewrites react and deletes the lockfile",
        edit(
            file(
                "package.json",
                json.dumps(
                    {
                        **HONEST_PACKAGE,
                        "scripts": {**HONEST_PACKAGE["scripts"], "postinstall": "node plant.js"},
                        "dependencies": {**HONEST_PACKAGE["dependencies"], "js-tokens": "4.0.0"},
                    },
                    indent=2,
                ),
            ),
            file(
                "plant.js",
                "const fs = require('fs');"
                f"fs.appendFileSync('node_modules/react/index.js', '\\nglobalThis.planted = \"{PLANTED}\";\\n');"
                "fs.rmSync('package-lock.json', { force: true });",
            ),
            file("server.js", SERVER_JS.replace("{host}", "127.0.0.1")),
        ),
        (),
    ),
    Case("the honest project, written over it", HONEST_REPLY, ()),
]


# A dev server that fills the workspace while it runs: at the first request it answers (the check
# that it is up) it writes past the cap before answering, then goes on writing. So the next step
# always finds the folder over the cap, however fast the capture and the models were.
SERVER_FILL = [
    Case(
        "a dev server writes past the workspace cap while it runs",
        edit(
            package({"dev": "node server.js"}),
            file(
                "server.js",
                "const fs = require('fs'); let i = 0, filling = false;"
                "require('http').createServer((q, s) => { s.setHeader('content-type', 'text/html');"
                " if (!filling) { filling = true;"
                " for (let k = 0; k < 9; k++) fs.writeFileSync('fill' + (i++) + '.bin', Buffer.alloc(4000000));"
                " setInterval(() => fs.writeFileSync('fill' + (i++) + '.bin', Buffer.alloc(4000000)), 50); }"
                " s.end('<h1>Filling</h1>'); })"
                ".listen(Number(process.env.PORT), '127.0.0.1');",
            ),
        ),
        (),
    ),
    Case("the next step", edit(), ("over its size cap",)),
]
