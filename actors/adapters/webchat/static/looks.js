// How the page looks, apart from the conversation: the light/dark toggle and the welcome line.
//
// The toggle starts from what the page shows (the visitor's earlier choice, applied by theme.js before the first
// paint, else the system's prefers-color-scheme) and flips it; the choice is kept in localStorage for every later
// visit. The welcome line names the agent and the model from the hello frame (protocol.py), as text.

const THEME_KEY = "agent-gateway.theme";

function shownTheme() {
  const chosen = document.documentElement.dataset.theme;
  if (chosen === "light" || chosen === "dark") return chosen;
  return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
}

function showToggle(button) {
  const dark = shownTheme() === "dark";
  button.setAttribute("aria-pressed", dark ? "true" : "false");
  button.querySelector("use").setAttribute("href", dark ? "#icon-sun" : "#icon-moon");
  button.title = dark ? "Switch to the light theme" : "Switch to the dark theme";
}

export function setupThemeToggle(button) {
  button.addEventListener("click", () => {
    const next = shownTheme() === "dark" ? "light" : "dark";
    document.documentElement.dataset.theme = next;
    try {
      localStorage.setItem(THEME_KEY, next);
    } catch (_) {
      // Not kept: this visit only.
    }
    showToggle(button);
  });
  window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => showToggle(button));
  showToggle(button);
}

// ``facts``: the hello frame's profile, agent (offline | openai) and model.
export function welcomeText(facts) {
  const who = !facts.profile || facts.profile === "default" ? "the gateway's agent" : `the ${facts.profile} agent`;
  if (facts.agent === "offline") {
    return `You are talking to ${who}, offline: no language model is configured yet, so it echoes what you write `
      + "and runs its small built-in tools.";
  }
  if (facts.agent === "openai") {
    return facts.model ? `You are talking to ${who}, answering with the model ${facts.model}.`
      : `You are talking to ${who}.`;
  }
  return "";
}

export function showWelcome(line, facts) {
  const text = welcomeText(facts);
  line.textContent = text;
  line.hidden = !text;
}
