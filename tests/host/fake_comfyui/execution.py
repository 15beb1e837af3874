"""Stand-in for upstream's execution.PromptExecutor: here a prompt is a callable, run as is,
or a list of nodes, each a callable that upstream's per-node step, this module's execute(),
runs in turn, as upstream's executor runs a graph's nodes one at a time."""

import asyncio
from enum import Enum


class ExecutionResult(Enum):
    SUCCESS = 0
    FAILURE = 1
    PENDING = 2


async def execute(server, dynprompt, caches, current_item, extra_data, executed, prompt_id, execution_list,
                  pending_subgraph_results, pending_async_nodes):
    """Upstream's signature; `current_item` is the node itself. An exception ends the prompt,
    as upstream's executor stops at a failed node (here it reaches the caller)."""
    current_item()
    return ExecutionResult.SUCCESS, None, None


class PromptExecutor:
    success = True

    def execute(self, prompt, prompt_id, extra_data={}, execute_outputs=[]):
        if callable(prompt):
            prompt()
            return
        asyncio.run(self.execute_async(prompt, prompt_id, extra_data))

    async def execute_async(self, prompt, prompt_id, extra_data):
        executed = set()
        for node in prompt:
            # Looked up in the module at each node, as upstream's loop calls it.
            await execute(None, None, None, node, extra_data, executed, prompt_id, None, {}, {})
