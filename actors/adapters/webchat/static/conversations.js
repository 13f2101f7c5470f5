// Earlier conversations: the visitor's own, listed on request (Earlier chats) and opened to read, in a panel of
// their own (#earlier) that covers the current conversation without touching it: the current one keeps receiving
// its answers in #messages meanwhile. The server lists and opens only the visitor's own (earlier.py): the page
// names a conversation by the id the list gave it.
//
// Frames (actors/adapters/webchat/earlier.py): {"type": "conversations"} -> the list; {"type": "conversation",
// "id"} -> its messages, shown with messages.js as the history is.
import { addMessage, setAnswer, showFiles } from "./messages.js";

const main = document.querySelector("main");
const panel = document.getElementById("earlier");
const list = document.getElementById("earlier-list");
const note = document.getElementById("earlier-note");
const earlierLog = document.getElementById("earlier-log");
const openButton = document.getElementById("earlier-chats");
const backButton = document.getElementById("earlier-back");

let send = () => false;

function when(seconds) {
  return new Date(seconds * 1000).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

function showNote(text) {
  note.textContent = text;
  note.hidden = !text;
}

function openPanel() {
  panel.hidden = false;
  main.classList.add("reading-earlier");
  openButton.setAttribute("aria-expanded", "true");
  list.hidden = false;
  earlierLog.hidden = true;
  earlierLog.replaceChildren();
  showNote("Loading…");
  if (!send({ type: "conversations" })) showNote("Not connected: the list comes when the connection is back.");
}

export function closeEarlier() {
  if (panel.hidden) return;
  panel.hidden = true;
  main.classList.remove("reading-earlier");
  openButton.setAttribute("aria-expanded", "false");
  main.scrollTop = main.scrollHeight;
}

function showList(items) {
  const earlier = items.filter((item) => !item.current);
  list.replaceChildren(...earlier.map((item) => {
    const entry = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.id = item.id;
    const date = document.createElement("span");
    date.className = "when";
    date.textContent = when(item.updated);
    const preview = document.createElement("span");
    preview.className = "preview";
    preview.textContent = item.preview || "(no message)";
    button.append(date, preview);
    button.addEventListener("click", () => {
      showNote("Loading…");
      send({ type: "conversation", id: item.id });
    });
    entry.append(button);
    return entry;
  }));
  showNote(earlier.length ? "" : "No earlier conversations yet: New chat keeps the one you leave here.");
}

function showConversation(frame) {
  earlierLog.replaceChildren();
  for (const m of frame.messages || []) {
    if (m.role === "user") {
      if (/^\/(new|reset|stop)\s*$/i.test(String(m.text || "").trim())) continue;
      showFiles(addMessage(earlierLog, "user", m.text || ""), m.files || []);
    } else {
      setAnswer(addMessage(earlierLog, "assistant", ""), m, true);
    }
  }
  const first = (frame.messages || [])[0];
  showNote(`${first ? `From ${when(first.at)}. ` : ""}Read only: what you send goes to the current chat.`);
  list.hidden = true;
  earlierLog.hidden = false;
  main.scrollTop = 0;
}

// Called by app.js for the two frames it does not know itself.
export function onEarlierFrame(frame) {
  if (panel.hidden) return;   // answered after the visitor closed the panel
  if (typeof frame.error === "string") showNote(`Not available: ${frame.error}.`);
  else if (frame.type === "conversations") showList(frame.items || []);
  else if (frame.type === "conversation") showConversation(frame);
}

export function setupEarlier(sendFrame, form) {
  send = sendFrame;
  openButton.addEventListener("click", () => (panel.hidden ? openPanel() : closeEarlier()));
  backButton.addEventListener("click", closeEarlier);
  form.addEventListener("submit", closeEarlier);   // a message goes to the current chat: show it
  document.getElementById("new-chat").addEventListener("click", closeEarlier);
}
