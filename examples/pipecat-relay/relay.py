"""A Pipecat relay with Gatehouse as its tool backend, in text: each line on stdin is what the
caller says; what the agent says is printed, the checkpoint's question and the outcome included
when they arrive (docs/pipecat.md). A voice relay puts STT before the user aggregator and TTS
after the LLM, and nothing else changes.

    GATEHOUSE_URL=http://127.0.0.1:3000 GATEHOUSE_TOKEN=dev-token OPENAI_API_KEY=sk-... \\
        python relay.py --session call-42 < conversation.txt

OPENAI_BASE_URL points it at any server speaking the OpenAI protocol. Each line is sent when the
agent has answered the one before and ``--pause`` seconds have passed with nothing new said."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from gatehouse_client import AsyncGatehouse
from gatehouse_pipecat import GatehouseTools
from pipecat.frames.frames import EndFrame, Frame, LLMFullResponseEndFrame, LLMMessagesAppendFrame, LLMTextFrame, TTSSpeakFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.workers.runner import WorkerRunner

INSTRUCTIONS = (
    "You are a phone assistant. Propose an action with its tool, read back what it answers, and "
    "call confirm_call only after the caller says yes; change_call when they correct a detail."
)


class Printer(FrameProcessor):
    """Prints what the agent says, a line per reply, and notes when it last said something."""

    def __init__(self) -> None:
        super().__init__()
        self.line = ""
        self.said = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMTextFrame):
            self.line += frame.text
        elif isinstance(frame, LLMFullResponseEndFrame) and self.line:
            print(f"agent: {self.line}", flush=True)
            self.line = ""
            self.said.set()
        elif isinstance(frame, TTSSpeakFrame):
            print(f"agent: {frame.text}", flush=True)
            self.said.set()
        await self.push_frame(frame, direction)


async def quiet(printer: Printer, pause: float, limit: float) -> None:
    """Until the agent has said nothing new for ``pause`` seconds (at most ``limit``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while loop.time() < deadline:
        printer.said.clear()
        try:
            await asyncio.wait_for(printer.said.wait(), timeout=pause)
        except asyncio.TimeoutError:
            return


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--session", required=True, help="the conversation's id: its calls are found again after a restart")
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL", "gpt-4.1"))
    parser.add_argument("--pause", type=float, default=2.0, help="seconds of silence before the next line")
    args = parser.parse_args()

    async with AsyncGatehouse(os.environ["GATEHOUSE_URL"], os.environ["GATEHOUSE_TOKEN"]) as gatehouse:
        llm = OpenAILLMService(
            api_key=os.environ.get("OPENAI_API_KEY", ""),
            base_url=os.environ.get("OPENAI_BASE_URL"),
            settings=OpenAILLMService.Settings(model=args.model, system_instruction=INSTRUCTIONS),
        )
        tools = await GatehouseTools.attach(llm, gatehouse, args.session)
        aggregators = LLMContextAggregatorPair(LLMContext(tools=tools.schema))
        printer = Printer()
        worker = PipelineWorker(Pipeline([aggregators.user(), llm, printer, aggregators.assistant()]), cancel_on_idle_timeout=False)
        started = asyncio.Event()

        async def _started(_worker: PipelineWorker, _frame: Frame) -> None:
            started.set()

        worker.add_event_handler("on_pipeline_started", _started)

        async def converse() -> None:
            await started.wait()
            for line in sys.stdin:
                if not line.strip():
                    continue
                print(f"caller: {line.strip()}", flush=True)
                await worker.queue_frame(LLMMessagesAppendFrame(messages=[{"role": "user", "content": line.strip()}], run_llm=True))
                await quiet(printer, args.pause, limit=60)
            await tools.aclose()
            await worker.queue_frame(EndFrame())

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)
        await asyncio.gather(runner.run(), converse())


if __name__ == "__main__":
    asyncio.run(main())
