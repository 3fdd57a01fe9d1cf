"""One browser tab as a Streamlit server sees it: its websocket protocol, without a browser.

BackMsg / ForwardMsg protobufs on /_stcore/stream, as the browser sends and reads them. Used by the load
test (bench/load.py) and by tests/test_serve.py. Like a browser it first loads the page over HTTP and keeps
the cookies it is given (behind `make serve`, HAProxy's sticky cookie names the replica), and it keeps the
URL's query string that the app writes, so that after a reconnect it can ask for the same view again.
"""

from __future__ import annotations

import asyncio
import urllib.request
from http.cookies import SimpleCookie

REPLICA_COOKIE = "attention_lab_replica"  # serve/haproxy.cfg.template


class StreamlitSession:
    def __init__(self, url: str, timeout_s: float, keep_drawn: bool = False) -> None:
        self.url, self.timeout_s, self.keep_drawn = url, timeout_s, keep_drawn
        self.drawn = b""  # with keep_drawn: every element of the last run, serialized (to look for text in)
        self.pages: dict[str, str] = {}  # url path ("" for the default page) -> page script hash
        self.text_boxes: dict[str, str] = {}  # label -> widget id, of the last page drawn
        self.text_box_fragments: dict[str, str] = {}  # label -> the fragment a box is drawn in ("" for none)
        self.query_string = ""  # the URL's query string as the app last set it
        self.cookies: dict[str, str] = {}
        self.ws = None
        self.closed: asyncio.Future | None = None

    @property
    def replica(self) -> str | None:
        """The replica HAProxy chose for this tab (None without a proxy)."""
        return self.cookies.get(REPLICA_COOKIE)

    def _load_page(self) -> None:
        """GET / as a browser does first; Set-Cookie headers are kept (a replica that is down gets replaced)."""
        request = urllib.request.Request(f"{self.url}/", headers=self._cookie_header())
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            response.read()
            for header in response.headers.get_all("Set-Cookie") or []:
                for name, morsel in SimpleCookie(header).items():
                    self.cookies[name] = morsel.value

    def _cookie_header(self) -> dict[str, str]:
        return {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if self.cookies else {}

    async def connect(self) -> None:
        import websockets

        await asyncio.to_thread(self._load_page)
        self.ws = await websockets.connect(self.url.replace("http", "ws", 1) + "/_stcore/stream",
                                           subprotocols=["streamlit"], origin=self.url, max_size=None,
                                           open_timeout=self.timeout_s, additional_headers=self._cookie_header())
        self.closed = asyncio.ensure_future(self.ws.wait_closed())  # done once the connection is gone

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def rerun(self, page_name: str = "", page_hash: str = "", text: dict[str, str] | None = None,
                    query_string: str | None = None, as_typed: bool = False) -> dict[str, int]:
        """Ask for a run (a page, with typed text) and read until it finished: element counts by type.
        `as_typed`: rerun only the fragment the typed box is drawn in, as a browser does (the whole page when the
        box is in none)."""
        from streamlit.proto.BackMsg_pb2 import BackMsg

        message = BackMsg()
        state = message.rerun_script
        state.page_name, state.page_script_hash = page_name, page_hash
        state.query_string = self.query_string if query_string is None else query_string
        for label, value in (text or {}).items():
            widget = state.widget_states.widgets.add()
            widget.id, widget.string_value = self.text_boxes[label], value
            if as_typed:
                state.fragment_id = self.text_box_fragments.get(label, "")
        await self.ws.send(message.SerializeToString())
        return await asyncio.wait_for(self._until_finished(), self.timeout_s)

    async def _until_finished(self) -> dict[str, int]:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        elements: dict[str, int] = {}
        text_boxes: dict[str, str] = {}
        fragments: dict[str, str] = {}
        drawn: list[bytes] = []
        while True:
            message = ForwardMsg()
            message.ParseFromString(await self.ws.recv())
            kind = message.WhichOneof("type")
            if kind == "navigation":
                self.pages = {p.url_pathname: p.page_script_hash for p in message.navigation.app_pages}
            elif kind == "page_info_changed":
                self.query_string = message.page_info_changed.query_string
            elif kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                element = message.delta.new_element
                element_type = element.WhichOneof("type")
                elements[element_type] = elements.get(element_type, 0) + 1
                if element_type in ("text_area", "text_input"):
                    widget = getattr(element, element_type)
                    text_boxes[widget.label] = widget.id
                    fragments[widget.label] = message.delta.fragment_id
                if self.keep_drawn:
                    drawn.append(element.SerializeToString())
                if element_type == "exception":
                    raise RuntimeError(f"exception on the page: {element.exception.message[:160]}")
            elif kind == "script_finished":
                if message.script_finished == message.FINISHED_WITH_COMPILE_ERROR:
                    raise RuntimeError("the page failed to compile")
                if message.script_finished != message.FINISHED_EARLY_FOR_RERUN:
                    if text_boxes:
                        self.text_boxes, self.text_box_fragments = text_boxes, fragments
                    self.drawn = b"".join(drawn)
                    return elements
