"""``run_gateway.py chat``: the terminal adapter, end to end through the running daemon.

On a terminal the chat runs under a pseudo-terminal (pexpect) and what it wrote is rendered by a terminal emulator
(pyte): the assertions are on the screen a person sees, not on the bytes, which hold every redraw of every preview.
An answer on a terminal is markdown rendered (daemon/markdown_rows.py); into a pipe it is the text as written.
Each test speaks as its own user: the daemon is shared, and each user is their own conversation.
"""
from __future__ import annotations

import asyncio
import io

import pexpect
import pyte
import pytest

from actors.agents.base import AgentRequest
from actors.agents.offline import FAKE_SECRET, OfflineAgent
from actors.messages import TurnEnd
from daemon.markdown_rows import STYLE, rendered
from tests.gateway import PYTHON, ROOT, Gateway, interruptible

pytestmark = pytest.mark.timeout(120)

COLUMNS, LINES = 60, 40     # narrow: the offline answer's long lines wrap, and it all fits on the screen
WAIT_S = 60                 # for an answer on a loaded 2-core machine


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    gw = Gateway(tmp_path_factory.mktemp("terminal_chat"), extra_toml="[agent]\nchunk_delay_s = 0.0\n")
    gw.start()
    gw.wait_ready()
    yield gw
    gw.cli("stop")
    gw.kill_everything()


def offline_answer(text: str) -> str:
    """The offline agent's final answer to ``text`` as a conversation's first message (it has a code block)."""
    async def final():
        request = AgentRequest(({"role": "user", "content": text},))
        async for event in OfflineAgent(chunk_delay_s=0, test_hooks=True).run(request):
            if isinstance(event, TurnEnd):
                return event.final_text
    return asyncio.run(final())


def spawn_chat(gateway: Gateway, *args: str) -> tuple[pexpect.spawn, io.BytesIO]:
    child = pexpect.spawn(PYTHON, [str(ROOT / "run_gateway.py"), "--config", str(gateway.config), "chat", *args],
                          env={**gateway.env, "TERM": "xterm"}, dimensions=(LINES, COLUMNS), cwd=str(ROOT),
                          preexec_fn=interruptible)
    output = io.BytesIO()
    child.logfile_read = output
    return child, output


def screen(output: bytes) -> list[str]:
    emulator = pyte.Screen(COLUMNS, LINES)
    pyte.ByteStream(emulator).feed(output)
    return [row.rstrip() for row in emulator.display]


def squeezed(text: str) -> str:
    """Without whitespace: rows join back only this way (a code block's long line wraps anywhere)."""
    return "".join(text.split())


def as_drawn(markdown: str) -> str:
    """The characters a terminal shows of ``markdown`` rendered at the test's width (styles left out)."""
    return STYLE.sub("", rendered(markdown, COLUMNS).text)


def test_chat_message_prints_the_streamed_answer_and_exits_0(gateway):
    result = gateway.cli("chat", "--as", "ada", "--message", "hello from the terminal", timeout=60)
    assert result.returncode == 0, result.stderr
    assert "hello from the terminal" in result.stdout and "offline" in result.stdout.lower()
    assert "▍" not in result.stdout.splitlines()[-1]


def test_piped_output_is_the_final_answer_once(gateway):
    message = "write to a pipe #slow 0.05"
    result = gateway.cli("chat", "--as", "bob", "--message", message, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == offline_answer(message) + "\n", f"the answer once, no previews: {result.stdout!r}"


def test_each_user_is_their_own_conversation(gateway):
    gateway.cli("chat", "--as", "cy", "--message", "one", timeout=60, check=True)
    second = gateway.cli("chat", "--as", "cy", "--message", "two", timeout=60, check=True)
    other = gateway.cli("chat", "--as", "dan", "--message", "first of dan", timeout=60, check=True)
    assert "2 messages from you" in second.stdout
    assert "1 message from you" in other.stdout


@pytest.mark.parametrize("hook", ["#fail", "#failmid"])
def test_a_failed_turn_exits_1_with_its_error_on_stderr(gateway, hook):
    result = gateway.cli("chat", "--as", f"eve{hook[1:]}", "--message", f"break {hook}", timeout=60)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stderr.startswith("the turn failed: The agent failed (offline agent failure requested by "
                                    f"{hook}"), result.stderr
    assert FAKE_SECRET not in result.stderr + result.stdout
    assert result.stdout.count("The agent failed") == 1, "the chat shows the notice once, as part of the answer"


def test_a_command_answered_without_the_model_exits_0(gateway):
    result = gateway.cli("chat", "--as", "fay", "--message", "/help", timeout=60)
    assert result.returncode == 0 and result.stderr == "", (result.stdout, result.stderr)


def test_message_on_a_terminal_leaves_the_answer_on_screen_once(gateway):
    message = "on a terminal, wide: " + "界" * 12 + " #slow 0.02"
    child, output = spawn_chat(gateway, "--as", "gus", "--message", message)
    child.expect(pexpect.EOF, timeout=WAIT_S)
    child.wait()
    assert child.exitstatus == 0, output.getvalue()[-500:]
    rows = screen(output.getvalue())
    shown = "\n".join(rows).strip("\n")
    assert squeezed(shown) == squeezed(as_drawn(offline_answer(message))), "\n".join(rows)
    assert b"\x1b[J" in output.getvalue(), "the test needs previews that were not extensions of the one before"


def test_interactive_chat_shows_each_answer_once_and_keeps_typed_keys_for_the_prompt(gateway):
    # 'You said: "' and 48 characters fill all but the last cell of the row: the wide character comes next.
    message = "x" * 48 + "世界 and a long line #slow 0.1"
    typed = " ".join(f"typed{n}" for n in range(20))     # over two rows: an echo would not fit in the answer's row
    child, output = spawn_chat(gateway, "--as", "hal")
    child.expect_exact("you> ", timeout=WAIT_S)
    child.send(message + "\r")
    child.expect_exact("You said", timeout=WAIT_S)   # streaming: ~30 chunks 0.1 s apart are still to come
    child.send(typed)
    child.expect_exact("you> ", timeout=WAIT_S)      # the answer has ended: the next prompt
    child.expect_exact("typed19", timeout=WAIT_S)    # ... shows the keys typed meanwhile, on its line
    rows = screen(output.getvalue())
    picture = "\n".join(rows)
    prompts = [n for n, row in enumerate(rows) if row.startswith("you> ")]
    assert len(prompts) == 2, picture
    first = next(n for n, row in enumerate(rows) if "You said" in row)
    assert squeezed("".join(rows[first:prompts[1]])) == squeezed(as_drawn(offline_answer(message))), picture
    assert squeezed("".join(rows[prompts[1]:])) == squeezed("you> " + typed), picture
    assert squeezed(picture).count("Yousaid") == 1 and "▍" not in picture, picture
    assert picture.count("typed0") == 1, picture
    child.sendcontrol("u")      # empty the prompt's line, then Ctrl-D leaves
    child.sendcontrol("d")
    child.expect(pexpect.EOF, timeout=WAIT_S)
    child.wait()
    assert child.exitstatus == 0


def test_ctrl_c_stops_the_answer_which_stays_on_screen_once_and_the_chat_goes_on(gateway):
    child, output = spawn_chat(gateway, "--as", "ivy")
    child.expect_exact("you> ", timeout=WAIT_S)
    # One chunk a second: the answer would take ~25 s more, far longer than a Ctrl-C takes to stop it on a loaded
    # machine (0.2 s a chunk left a loaded run only ~5 s, and once the whole answer came before the stop).
    child.send("stop me #slow 1\r")
    child.expect_exact("offline agent", timeout=WAIT_S)    # the second chunk: ~25 more 1 s apart to come
    child.sendintr()
    child.expect_exact("you> ", timeout=WAIT_S)
    child.send("and now?\r")
    child.expect_exact("you> ", timeout=WAIT_S)            # answered (the answer's words wrap: not in the bytes)
    picture = "\n".join(screen(output.getvalue()))
    assert "2messagesfromyou" in squeezed(picture), picture
    assert picture.count("(stopped)") == 1 and picture.count("You said") == 2, picture
    assert picture.index("(stopped)") < picture.index("you> and now?") and "▍" not in picture, picture
    assert "api_key_env" in picture.split("you> and now?")[1] and "api_key_env" not in picture.split("(stopped)")[0]
    child.sendcontrol("d")
    child.expect(pexpect.EOF, timeout=WAIT_S)
    child.wait()
    assert child.exitstatus == 0


def test_chat_without_a_gateway_fails_clearly(tmp_path):
    gw = Gateway(tmp_path)
    result = gw.cli("chat", "--message", "anyone?", timeout=30)
    assert result.returncode == 3 and "no gateway running" in result.stderr


def test_a_message_over_the_text_bound_is_refused_saying_so_not_cut(gateway):
    """[gateway] max_text_chars (16,000 by default) binds the terminal as every platform: the line is refused with
    the reason, never cut to the bound and answered as if whole."""
    result = gateway.cli("chat", "--as", "gil", "--message", "x" * 16_001, timeout=60)
    assert result.returncode != 0, (result.stdout, result.stderr)
    assert "16,001 characters" in result.stderr and "at most 16,000" in result.stderr, result.stderr
    assert "offline" not in result.stdout.lower(), f"the cut message was answered: {result.stdout[:300]!r}"


def test_an_answer_on_a_terminal_is_markdown_rendered_and_wrapped_at_word_boundaries(gateway):
    """Streamed (an edit every chunk), then ended: the screen shows the rendering, not the markup, with no word cut
    across two rows, once."""
    words = [f"word{n:02d}" for n in range(20)]          # 140 characters: three rows at 60 columns
    message = f"**strong words** and `inline code` then {' '.join(words)} #slow 0.05"
    child, output = spawn_chat(gateway, "--as", "mia", "--message", message)
    child.expect(pexpect.EOF, timeout=WAIT_S)
    child.wait()
    assert child.exitstatus == 0, output.getvalue()[-500:]
    emulator = pyte.Screen(COLUMNS, LINES)
    pyte.ByteStream(emulator).feed(output.getvalue())
    rows = [row.rstrip() for row in emulator.display]
    picture = "\n".join(rows)
    assert "**" not in picture and "```" not in picture and "▍" not in picture, picture
    assert 'kind = "openai"' in picture and squeezed(picture).count("Yousaid") == 1, picture
    y = next(n for n, row in enumerate(rows) if "strong words" in row)
    x = rows[y].index("strong words")
    assert all(emulator.buffer[y][x + i].bold for i in range(len("strong words"))), "**strong words** is bold"
    shown = [token.strip('"') for row in rows for token in row.split()]
    shown = [token for token in shown if token.startswith("word") and token != "words"]
    assert shown == words, f"each word whole on one row, in order:\n{picture}"
    assert "restart the gateway:" in rows, picture
