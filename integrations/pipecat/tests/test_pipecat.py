"""gatehouse-pipecat in a real Pipecat pipeline: Pipecat's own OpenAI LLM service (talking to a
scripted model, a local server speaking the OpenAI protocol), its context aggregators and its
function-call machinery, against the running Gatehouse."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

import httpx
from typing import Any, List, Optional

from gatehouse_client import AsyncGatehouse
from gatehouse_pipecat import GatehouseTools
from gatehouse_client.voice import ASKING, FILLER, OVERTAKEN, UNREACHABLE
from pipecat.frames.frames import (
    Frame,
    FunctionCallCancelFrame,
    FunctionCallInProgressFrame,
    FunctionCallResultFrame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMMessagesAppendFrame,
    LLMTextFrame,
    TTSSpeakFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.openai.llm import OpenAILLMService
from pipecat.tests.utils import SleepFrame, run_test

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from scripted_model import (  # noqa: E402
    SEED, TURN_COST_STEPS, Hangs, ScriptedModel, SlowAnswers, direct_route_ms, play_example, report_turn_cost,
)

URL = os.environ["GATEHOUSE_URL"]
TOKEN = os.environ["GATEHOUSE_TOKEN"]
# The same application without its database (clients/test starts both).
DEGRADED_URL = os.environ["GATEHOUSE_DEGRADED_URL"]


class Heard(FrameProcessor):
    """What reached the speaker: each reply of the model, and every TTSSpeakFrame's text
    (``spoken``: those alone)."""

    def __init__(self) -> None:
        super().__init__()
        self.said: List[str] = []
        self.spoken: List[str] = []
        self._reply = ""

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSSpeakFrame):
            self.said.append(frame.text)
            self.spoken.append(frame.text)
        elif isinstance(frame, LLMTextFrame):
            self._reply += frame.text
        elif isinstance(frame, LLMFullResponseEndFrame) and self._reply:
            self.said.append(self._reply)
            self._reply = ""
        await self.push_frame(frame, direction)


def user(text: str) -> LLMMessagesAppendFrame:
    return LLMMessagesAppendFrame(messages=[{"role": "user", "content": text}], run_llm=True)


async def pipeline(
    model: ScriptedModel, gatehouse: AsyncGatehouse, session: str, watch: Optional[FrameProcessor] = None, **options: Any
) -> Any:
    """The relay's pipeline with ``watch`` (a ``Heard`` by default) after the LLM service."""
    settings = OpenAILLMService.Settings(model="scripted", system_instruction="You help by phone.")
    llm = OpenAILLMService(api_key="scripted", base_url=model.base_url, settings=settings)
    tools = await GatehouseTools.attach(llm, gatehouse, session, **options)
    aggregators = LLMContextAggregatorPair(LLMContext(tools=tools.schema))
    watch = watch or Heard()
    return Pipeline([aggregators.user(), llm, watch, aggregators.assistant()]), tools, watch


def test_the_seed_conversation_with_a_restart_before_the_yes() -> None:
    async def conversation() -> None:
        session = f"pipecat-{uuid.uuid4().hex[:12]}"
        model = ScriptedModel([
            [("send_email", SEED)], "I'll email John about the meeting. Shall I?",
            [("change_call", {"changes": {"to": "john.smith@gmail.com"}})], "Sending it to john.smith then. Shall I?",
        ])
        async with AsyncGatehouse(URL, TOKEN) as gh:
            first, tools, _ = await pipeline(model, gh, session)
            await run_test(first, frames_to_send=[user("Email John about tomorrow's meeting."), SleepFrame(1.0),
                                                  user("Actually it's john.smith@gmail.com."), SleepFrame(1.0)])
            await tools.aclose()
            results = model.function_results()
            assert "john@gmail.com" in str(results[0]) and "john.smith@gmail.com" in str(results[1]), results

        # The relay restarts: a new pipeline and client on the same conversation.
        model.script.extend([[("confirm_call", {})], "On it.", [("confirm_call", {})], "Going ahead."])
        async with AsyncGatehouse(URL, TOKEN) as gh:
            second, tools, heard = await pipeline(model, gh, session, Calls())
            await run_test(second, frames_to_send=[user("Yes, send it."), SleepFrame(2.0), user("Go ahead."), SleepFrame(3.0)])
            await tools.aclose()
            assert any("john.smith@gmail.com" in said for said in heard.said), heard.said
            # The question and the outcome came as each yes's own result (Pipecat's async function
            # results: an intermediate answer, then the news as the final one), not a TTSSpeakFrame.
            assert heard.seen.count("start confirm_call") == 2 and heard.seen.count("result confirm_call") == 4, heard.seen
            news = [r for r in heard.results if isinstance(r, str) and r.startswith("Say this to the caller")]
            assert len(news) == 2 and "is ready" in news[0] and "sent to john.smith@gmail.com" in news[1], heard.results
            assert not any("is ready" in line or "sent to" in line for line in heard.spoken), heard.spoken
            calls = await gh.get_session_calls(session)
            assert calls["pending_total"] == 0 and calls["recent_total"] == 1, calls
            assert calls["recent"][0]["status"] == "COMPLETED"
        model.close()

    asyncio.run(conversation())


class Calls(Heard):
    """The order in which function calls, their results and interruptions passed (and when), and
    what reached the speaker."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: List[str] = []
        self.at: List[float] = []
        self.results: List[Any] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, FunctionCallInProgressFrame):
            self._note(f"start {frame.function_name}")
        elif isinstance(frame, FunctionCallResultFrame):
            self._note(f"result {frame.function_name}")
            self.results.append(frame.result)
        elif isinstance(frame, FunctionCallCancelFrame):
            self._note(f"cancelled {frame.function_name}")
        elif isinstance(frame, InterruptionFrame):
            self._note("interrupted")
        await super().process_frame(frame, direction)

    def _note(self, what: str) -> None:
        self.seen.append(what)
        self.at.append(asyncio.get_running_loop().time())


async def slow_pipeline(model: ScriptedModel, path: str, session: str, delay: float = 1.5) -> Any:
    """A pipeline whose Gatehouse answers ``POST <path>`` ``delay`` s late, watched by ``Calls``."""
    gatehouse = AsyncGatehouse(URL, TOKEN, http=httpx.AsyncClient(transport=SlowAnswers(path, delay)))
    p, tools, calls = await pipeline(model, gatehouse, session, Calls())
    return p, tools, calls, gatehouse


def test_a_barge_in_during_the_confirmation_and_the_same_call_again_send_one_email() -> None:
    async def conversation() -> None:
        session = f"pipecat-barge-{uuid.uuid4().hex[:12]}"
        async with AsyncGatehouse(URL, TOKEN) as gh:
            proposed = await gh.create_tool_call({"session_id": session, "function_name": "send_email", "parameters": SEED})
        model = ScriptedModel([[("confirm_call", {})], "On it.",
                               [("send_email", SEED)], "It's on its way; I'll ask before it goes.",
                               [("confirm_call", {})], "Sent."])
        p, tools, calls, gatehouse = await slow_pipeline(model, "/voice-tools/confirm", session)
        await run_test(p, frames_to_send=[
            # The checkpoint waits checkpoint_ttl_seconds (4 s in clients/test): the caller's go-ahead
            # comes 2.5 s after the yes.
            user("Yes, send it."), SleepFrame(0.5), InterruptionFrame(), SleepFrame(1.2),
            user("Hello? Did you send the email?"), SleepFrame(0.8),
            user("Go ahead."), SleepFrame(3.0)])
        await tools.aclose()
        await gatehouse.aclose()
        # The interruption came while the confirmation ran, and did not cut it off.
        order = calls.seen
        assert order.index("interrupted") < order.index("result confirm_call"), order
        assert "cancelled confirm_call" not in order, order
        async with AsyncGatehouse(URL, TOKEN) as gh:
            context = await gh.get_session_calls(session)
            assert context["pending_total"] == 0 and context["recent_total"] == 1, context
            assert context["recent"][0]["tool_call_id"] == proposed["tool_call_id"]
            assert context["recent"][0]["status"] == "COMPLETED", context
        model.close()

    asyncio.run(conversation())


def test_a_repeated_yes_over_a_slow_confirm_asks_the_checkpoint_question_before_anything_is_sent() -> None:
    async def conversation() -> None:
        session = f"pipecat-again-{uuid.uuid4().hex[:12]}"
        async with AsyncGatehouse(URL, TOKEN) as gh:
            proposed = await gh.create_tool_call({"session_id": session, "function_name": "send_email", "parameters": SEED})
        # Turns in the order the pipeline asks for them: a confirmation runs asynchronously, so the
        # second yes comes while the first is out; then the answers to each, the go-ahead, its answer.
        model = ScriptedModel([[("confirm_call", {})], [("confirm_call", {})], "Let me check.", "Okay.",
                               [("confirm_call", {})], "Sending it.", "Sent."])
        p, tools, calls, gatehouse = await slow_pipeline(model, "/voice-tools/confirm", session, delay=2.0)
        await run_test(p, frames_to_send=[
            # "Yes, send it": its answer comes 2 s late. The caller talks over the agent and says
            # yes again before it comes; then answers the question. The checkpoint waits
            # checkpoint_ttl_seconds (4 s in clients/test): the go-ahead comes 2.7 s after the
            # first yes, once the first yes's answer (at 2 s) is in.
            user("Yes, send it."), SleepFrame(0.3), InterruptionFrame(), SleepFrame(1.2),
            user("Did you send it? Yes, send it."), SleepFrame(1.2),
            user("Yes, go ahead."), SleepFrame(3.0)])
        await tools.aclose()
        await gatehouse.aclose()
        question = next(i for i, line in enumerate(calls.said) if "is ready" in line)
        sent = next(i for i, line in enumerate(calls.said) if "sent to" in line)
        assert question < sent, calls.said
        assert ASKING in calls.results and OVERTAKEN in calls.results, calls.results
        # No false line: nothing said or given to the model claims a step the call had passed.
        assert not any("check with you" in str(line) for line in calls.said + calls.results), (calls.said, calls.results)
        async with AsyncGatehouse(URL, TOKEN) as gh:
            context = await gh.get_session_calls(session)
            assert context["pending_total"] == 0 and [c["status"] for c in context["recent"]] == ["COMPLETED"], context
            assert context["recent"][0]["tool_call_id"] == proposed["tool_call_id"]
        model.close()

    asyncio.run(conversation())


def test_a_hanging_gatehouse_gets_a_filler_and_a_true_line_within_the_deadline() -> None:
    async def conversation() -> None:
        session = f"pipecat-hang-{uuid.uuid4().hex[:12]}"
        model = ScriptedModel([[("send_email", SEED)], "I can't reach it right now."])
        gatehouse = AsyncGatehouse(URL, TOKEN, http=httpx.AsyncClient(transport=Hangs()))
        p, tools, calls = await pipeline(model, gatehouse, session, Calls(), deadline=1.5, filler_after=0.3)
        await run_test(p, frames_to_send=[user("Email John."), SleepFrame(4.5)])
        await tools.aclose()
        await gatehouse.aclose()
        started, answered = calls.at[calls.seen.index("start send_email")], calls.at[calls.seen.index("result send_email")]
        # The deadline bounds the wait (the client alone would wait 30 s and more); the slack is
        # for a busy machine.
        assert answered - started < 4.0, calls.seen
        assert calls.results == [UNREACHABLE], calls.results
        assert FILLER in calls.said, calls.said
        model.close()

    asyncio.run(conversation())


def test_a_restarted_relay_asks_the_waiting_question_and_speaks_an_outcome_once() -> None:
    async def conversation() -> None:
        async with AsyncGatehouse(URL, TOKEN) as gh:
            # A call left at its checkpoint by a relay that died before asking.
            at_checkpoint = f"pipecat-pick-{uuid.uuid4().hex[:12]}"
            waiting = await gh.create_tool_call({"session_id": at_checkpoint, "function_name": "send_email", "parameters": SEED})
            assert (await gh.confirm_tool_call(waiting["tool_call_id"], wait=10))["status"] == "PREPARED"
            model = ScriptedModel([[("confirm_call", {})], "Sending it."])
            p, tools, heard = await pipeline(model, gh, at_checkpoint)
            await run_test(p, frames_to_send=[SleepFrame(1.5), user("Yes, send it."), SleepFrame(3.0)])
            await tools.aclose()
            question = next(i for i, line in enumerate(heard.said) if "is ready" in line)
            sent = next(i for i, line in enumerate(heard.said) if "sent to" in line)
            assert question < sent, heard.said
            model.close()

            # A call that finished while no relay was there: two relays pick the conversation up,
            # and the outcome is spoken by one of them, once.
            finished = f"pipecat-done-{uuid.uuid4().hex[:12]}"
            done = await gh.create_tool_call({"session_id": finished, "function_name": "send_email", "parameters": SEED})
            await gh.confirm_tool_call(done["tool_call_id"], wait=10)
            assert (await gh.resume_execution(done["tool_call_id"], {"action": "proceed"}, wait=10))["status"] == "COMPLETED"
            spoken: List[str] = []
            for _ in range(2):
                model = ScriptedModel([])
                p, tools, heard = await pipeline(model, gh, finished)
                await run_test(p, frames_to_send=[SleepFrame(1.5)])
                await tools.aclose()
                spoken += [line for line in heard.said if "sent to" in line]
                model.close()
            assert len(spoken) == 1, spoken

    asyncio.run(conversation())


def test_what_gatehouse_costs_a_turn() -> None:
    """Measured, not asserted: from each function call (the proposal, the yes, the go-ahead) to its
    result in Pipecat's pipeline, over several conversations, beside Gatehouse's own routes
    (docs/benchmarks.md, "What Gatehouse costs a turn"). What is asserted is that each conversation
    sent its email."""

    async def conversations(count: int) -> None:
        measured: dict[str, list[float]] = {step: [] for step in TURN_COST_STEPS}
        async with AsyncGatehouse(URL, TOKEN) as gh:
            for n in range(count):
                session = f"pipecat-cost-{n}-{uuid.uuid4().hex[:8]}"
                model = ScriptedModel([[("send_email", SEED)], "Shall I?", [("confirm_call", {})], "On it.",
                                       [("confirm_call", {})], "Sending it."])
                p, tools, calls = await pipeline(model, gh, session, Calls())
                await run_test(p, frames_to_send=[user("Email John."), SleepFrame(0.5), user("Yes."), SleepFrame(1.0),
                                                  user("Go ahead."), SleepFrame(1.0)])
                await tools.aclose()
                model.close()
                # Each step's cost is to its function call's first result (a yes's answer is an
                # intermediate result; its news comes later as the final one).
                starts = [i for i, what in enumerate(calls.seen) if what.startswith("start ")]
                firsts = [calls.seen.index(f"result {calls.seen[i][len('start '):]}", i) for i in starts]
                assert len(starts) == 3, calls.seen
                for step, start, result in zip(TURN_COST_STEPS, starts, firsts):
                    measured[step].append((calls.at[result] - calls.at[start]) * 1000)
                context = await gh.get_session_calls(session)
                assert [c["status"] for c in context["recent"]] == ["COMPLETED"], context
            report_turn_cost("pipecat", measured, await direct_route_ms(gh, count))

    asyncio.run(conversations(8))


def test_a_proposal_the_caller_interrupts_is_withdrawn() -> None:
    async def conversation() -> None:
        session = f"pipecat-withdraw-{uuid.uuid4().hex[:12]}"
        model = ScriptedModel([[("send_email", SEED)], "Shall I?", "Sorry, go on."])
        p, tools, calls, gatehouse = await slow_pipeline(model, "/voice-tools/pending", session)
        await run_test(p, frames_to_send=[user("Email John."), SleepFrame(0.5), InterruptionFrame(), SleepFrame(2.5)])
        await tools.aclose()
        await gatehouse.aclose()
        assert "cancelled send_email" in calls.seen, calls.seen
        async with AsyncGatehouse(URL, TOKEN) as gh:
            context = await gh.get_session_calls(session)
            assert context["pending_total"] == 0, "no call is left for a later yes to confirm"
            assert [c["status"] for c in context["recent"]] == ["CANCELLED"], context
        model.close()

    asyncio.run(conversation())


def test_gatehouse_unavailable_is_said_and_nothing_is_done() -> None:
    async def conversation() -> None:
        session = f"pipecat-down-{uuid.uuid4().hex[:12]}"
        model = ScriptedModel([[("send_email", SEED)], "I can't do that right now."])
        async with AsyncGatehouse(DEGRADED_URL, TOKEN, max_attempts=1) as degraded:
            p, tools, _ = await pipeline(model, degraded, session)
            await run_test(p, frames_to_send=[user("Email John."), SleepFrame(1.0)])
            await tools.aclose()
        assert model.function_results() == [UNREACHABLE], model.function_results()
        async with AsyncGatehouse(URL, TOKEN) as gh:
            context = await gh.get_session_calls(session)
            assert context["pending_total"] == 0 and context["recent_total"] == 0
        model.close()

    asyncio.run(conversation())


def test_the_example_relay_plays_the_seed_conversation() -> None:
    said = play_example("pipecat", f"pipecat-example-{uuid.uuid4().hex[:12]}")
    assert any("john.smith@gmail.com" in line and "ready" in line for line in said), said
    assert any("sent to john.smith@gmail.com" in line.lower() for line in said), said
