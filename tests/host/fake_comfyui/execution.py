"""Stand-in for upstream's execution.PromptExecutor: here a prompt is a callable, run as is."""


class PromptExecutor:
    success = True

    def execute(self, prompt, prompt_id, extra_data={}, execute_outputs=[]):
        prompt()
