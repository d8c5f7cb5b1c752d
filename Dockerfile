# webgen-agent's LangGraph server: the graph Studio talks to (langgraph.json), served by LangGraph's
# API server, as a non-root user, with runs and the database on the /data volume. docs/deploy.md:
# what the sandbox needs from the container runtime (deploy/seccomp-userns.json), compose.yaml, checks.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# -- the project's wheel (built apart: the image gets the package, not the checkout) -------------------
FROM ${PYTHON_IMAGE} AS wheel
WORKDIR /src
COPY . .
RUN pip install --no-cache-dir --root-user-action=ignore uv==0.13.9 \
 && uv build --wheel --out-dir /wheels .

# -- the server ------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
# Chromium's headless shell (screenshots, the GUI agent), Node.js and npm (the generated projects), bubblewrap, prlimit
# and libseccomp (the sandbox for generated code), libatomic (Playwright's Node.js driver), fonts for
# the pages, tini (PID 1, below). Not pinned: Debian's security updates come with each rebuild.
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      chromium-headless-shell nodejs npm bubblewrap util-linux libseccomp2 libatomic1 fonts-liberation ca-certificates tini \
 && rm -rf /var/lib/apt/lists/*
# The packages at the versions CI tested (the core package and LangGraph's server), then the project.
COPY requirements/studio.txt /tmp/requirements.txt
COPY --from=wheel /wheels /tmp/wheels
RUN pip install --no-cache-dir --root-user-action=ignore uv==0.13.9 \
 && uv pip install --system --no-cache --no-deps -r /tmp/requirements.txt /tmp/wheels/*.whl \
 && pip uninstall -y -q --root-user-action=ignore uv \
 && rm -rf /tmp/requirements.txt /tmp/wheels

RUN useradd --create-home --uid 10001 webgen \
 && mkdir -p /data /opt/webgen \
 && chown webgen:webgen /data /opt/webgen
WORKDIR /opt/webgen
COPY langgraph.json ./
ENV WEBGEN_CHROMIUM=/usr/lib/chromium/chromium-headless-shell \
    WEBGEN_DB=/data/webgen.db \
    WEBGEN_STATE_DIR=/data/state \
    WEBGEN_DEPS_CACHE=/opt/webgen/deps-cache \
    LANGGRAPH_CLI_NO_ANALYTICS=1 \
    LANGGRAPH_NO_VERSION_CHECK=true \
    LANGSMITH_TRACING=false
USER 10001
# The demo's npm packages (React, Vite) in the image's dependency cache: the first run needs no
# registry for them. Unconfined here: a build gets no user namespaces (the manifest is the demo's own).
RUN webgen-agent demo --prepare --no-sandbox --db /tmp/prepare/webgen.db && rm -rf /tmp/prepare

VOLUME ["/data"]
EXPOSE 8123
# The server's own records (threads, runs) go to its working folder: /data, beside the run database.
WORKDIR /data
# tini as PID 1 reaps the processes the sandbox leaves behind: bubblewrap's, whose parent exited
# first, go to PID 1, and LangGraph's server there left each as a zombie (five a run).
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["langgraph", "dev", "--host", "0.0.0.0", "--port", "8123", "--no-browser", "--no-reload", \
     "--n-jobs-per-worker", "3", "--config", "/opt/webgen/langgraph.json"]
