"""The reference offline Step-GRPO trainer (``webgen-agent train``; torch comes with the ``[train]`` extra)."""
