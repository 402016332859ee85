"""What ``kith chat`` shows and reads: Markdown replies (rich, live while they stream), notices as
plain text, a status line when the session changes, an ``OTR`` prompt while Off-The-Record is on, and
input with readline history.

Text from the server is made inert for the terminal first: a reply may quote anything (a web page, a
stranger's message), and an escape sequence in it must not retitle, clear or type into the terminal.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import unicodedata
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.text import Text

from gateway.cli.chat_interrupt import NUDGE

HISTORY_LENGTH = 1000
_KEEP = frozenset("\n\t\u200d")  # line breaks, tabs and the zero-width joiner inside emoji sequences


def inert(text: str) -> str:
    """``text`` with control and format characters (ESC, BEL, CSI, bidi overrides) shown as escapes."""
    out = []
    for ch in text:
        if ch not in _KEEP and unicodedata.category(ch) in ("Cc", "Cf"):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


class View:
    """The terminal side of an interactive ``kith chat``. ``read_line`` runs in the main thread; the
    rest may be called from the connection's thread, hence the lock."""

    def __init__(self, history_file: Path | None = None, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False, soft_wrap=False)
        self.history_file = history_file
        self._lock = threading.RLock()
        self._live: Live | None = None
        self._streamed = ""
        self._busy = False  # a message is being answered: status lines wait until its reply is shown
        self._pending: list[Text] = []
        self._prompt = ""
        self._gone = False  # the person left: what still arrives (a reply being streamed) is not drawn
        self._readline: Any = None
        self._setup_readline()

    # ------------------------------------------------------------------------------------- input
    def _setup_readline(self) -> None:
        if not sys.stdin.isatty():
            return
        try:
            import readline
        except ImportError:  # a Python without readline: plain input, no history
            return
        self._readline = readline
        readline.set_history_length(HISTORY_LENGTH)
        readline.parse_and_bind("set enable-bracketed-paste on")
        if self.history_file is not None:
            with contextlib.suppress(OSError):
                readline.read_history_file(self.history_file)

    def keep(self, line: str) -> None:
        """Append ``line`` to the history file (created 0600: it holds what was said). Not called for
        lines said Off-The-Record: they stay in this run's memory only."""
        if self._readline is None or self.history_file is None:
            return
        try:
            self.history_file.parent.mkdir(parents=True, exist_ok=True)
            if not self.history_file.exists():
                os.close(os.open(self.history_file, os.O_CREAT | os.O_WRONLY, 0o600))
            self._readline.append_history_file(1, self.history_file)
        except OSError:
            pass

    def read_line(self, *, otr: bool) -> str | None:
        """One line from the person (``otr``: the prompt says Off-The-Record is on); None on Ctrl-D."""
        # \001 \002 tell readline that the colour codes take no room on the line.
        self._prompt = "\001\x1b[1;31m\002OTR\001\x1b[0m\002> " if otr else "> "
        if not self.console.is_terminal:
            self._prompt = "OTR> " if otr else "> "
        try:
            with NUDGE.reading():
                line = input(self._prompt)
        except EOFError:
            self.bye()
            return None
        finally:
            self._prompt = ""
        if line.strip():
            self._busy = True
        return line

    def _above_prompt(self, renderable: Any) -> None:
        """Print while the person may be typing: clear the prompt line, print, draw it again."""
        prompt = self._prompt
        if prompt and self.console.is_terminal:
            self.console.file.write("\r\x1b[K")
        self.console.print(renderable)
        if prompt:
            typed = self._readline.get_line_buffer() if self._readline is not None else ""
            self.console.file.write(prompt.replace("\001", "").replace("\002", "") + typed)
            self.console.file.flush()

    # ------------------------------------------------------------------------------------ output
    def welcome(self, ready: dict[str, Any]) -> None:
        who = inert(str(ready.get("display_name") or ready.get("user_id") or ""))
        line = Text("kith chat", style="bold")
        line.append(f" · {who}" if who else "")
        line.append(f" · persona {inert(str(ready.get('persona') or '-'))}")
        line.append(" · /help for commands, Ctrl-D to quit", style="dim")
        self.console.print(line)
        if ready.get("otr"):
            self.console.print(self._status({}, {"otr": True}))
        if ready.get("notice"):
            self.console.print(Text(inert(str(ready["notice"])), style="yellow"))

    def _status(self, old: dict[str, Any], new: dict[str, Any]) -> Text | None:
        """The status line for a change of conversation state, or None when there is nothing to say."""
        if new.get("otr"):
            return Text("── Off-The-Record: nothing from here on is stored ──", style="bold red")
        if old.get("otr"):
            return Text("── back on the record ──", style="dim")
        persona = f" · persona {inert(str(new.get('persona') or old.get('persona') or '-'))}"
        if old.get("session_id") and new.get("session_id") != old.get("session_id"):
            return Text("── new session" + persona + " ──", style="dim")
        if "persona" in new and new["persona"] != old.get("persona"):
            return Text("── now talking to" + persona[3:] + " ──", style="dim")
        return None

    def state_changed(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """A ``state`` frame: a status line when the session, Off-The-Record or the persona changed."""
        status = self._status(old, new)
        if status is None:
            return
        with self._lock:
            if self._busy:
                self._pending.append(status)
            else:
                self._above_prompt(status)

    def delta(self, piece: str) -> None:
        with self._lock:
            if self._gone:
                return
            self._streamed += piece
            if not self.console.is_terminal:
                return  # no live redraw on a pipe: the whole reply is printed once it is complete
            if self._live is None:
                self._live = Live(console=self.console, auto_refresh=False, vertical_overflow="visible")
                self._live.start()
            self._live.update(Markdown(inert(self._streamed)), refresh=True)

    def reply(self, text: str, *, notice: bool, dropped: bool = False) -> None:
        with self._lock:
            if self._gone:
                return
            if dropped:
                self._stop_live()
            elif self._live is not None:
                self._live.update(self._render(text, notice), refresh=True)
                self._stop_live()
            else:
                self.console.print(self._render(text, notice))
            self._busy = False
            for status in self._pending:
                self.console.print(status)
            self._pending.clear()

    def _render(self, text: str, notice: bool) -> Any:
        # A notice (command answer, setup hint) is the host's plain text, line by line; Markdown would
        # join /help's lines into one paragraph.
        return Text(inert(text), style="cyan") if notice else Markdown(inert(text))

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        self._streamed = ""

    def abandon(self) -> None:
        """The reply never came (an error, a closed connection): keep what streamed, end the line."""
        with self._lock:
            self._stop_live()
            self._busy = False

    def proactive(self, text: str, *, notice: bool) -> None:
        """A message nobody asked for just now (a reminder)."""
        with self._lock:
            if self._gone:
                return
            self._above_prompt(self._render(text, notice))

    def disconnected(self) -> None:
        with self._lock:
            if self._gone:
                return
            self._stop_live()
            self._above_prompt(Text("── the connection to kith closed; Enter or Ctrl-D leaves ──", style="bold red"))

    def error(self, text: str) -> None:
        with self._lock:
            self._busy = False
            self.console.print(Text(inert(text), style="bold red"))

    def bye(self) -> None:
        with self._lock:
            self._gone = True
            self._stop_live()
            self.console.print()
