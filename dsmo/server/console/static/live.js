// Live console pages: a run page and the task list redraw themselves when what they show changes.
// They follow server-sent events (the run's stream, the task list's digests); the browser
// reconnects a dropped stream by itself and sends the last id it got.
"use strict";

// Trail events after which a run page shows something else.
const REDRAW_ON = new Set([
  "RUN_WAITING", "RUN_RESUMED", "RUN_COMPLETED", "RUN_ABORTED", "RUN_CONTINUED", "RUN_MIGRATED",
  "RUN_REWOUND", "STAGE_SUCCEEDED", "STAGE_FAILED", "DEAD_LETTERED", "TOOL_CALLED", "TOOL_DECIDED",
  "BUDGET_SPENT", "BUDGET_DECIDED", "CONTRACT_VIOLATION", "COMPENSATION_SUCCEEDED", "COMPENSATION_FAILED",
]);

// Trail events that end a stage attempt: its answer is then on the page itself.
const ENDS_ATTEMPT = new Set(["STAGE_SUCCEEDED", "STAGE_FAILED", "DEAD_LETTERED"]);

const main = document.getElementById("main");

// Redraw the page's content from the server, unless a person is filling in a form on it: then
// once they leave it. One redraw at a time; a change during one asks for one more.
let drawing = false;
let again = false;
async function redraw() {
  if (drawing) { again = true; return; }
  const editing = document.activeElement && document.activeElement.closest("form");
  if (editing) { document.activeElement.addEventListener("blur", redraw, { once: true }); return; }
  drawing = true;
  try {
    const response = await fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } });
    if (response.ok) {
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html").getElementById("main");
      if (fresh) {
        // The answer being written is not on the server's page yet: it stays across the redraw.
        const writing = document.getElementById("live-text");
        main.innerHTML = fresh.innerHTML;
        main.dataset.digest = fresh.dataset.digest || "";
        if (writing) main.prepend(writing);
      }
    }
  } finally {
    drawing = false;
    if (again) { again = false; redraw(); }
  }
}

// A model's answer as it is written, in a box of its own until its stage attempt ends. Each
// model call of the attempt (an answer asked again because it broke the output schema) starts
// the box afresh; each turn of a tool loop is a visit of its own, whose attempt ends it.
function showToken(data) {
  let box = document.getElementById("live-text");
  if (!box) {
    box = document.createElement("pre");
    box.id = "live-text";
    box.className = "live-text";
    box.setAttribute("aria-live", "polite");
    box.setAttribute("aria-label", "The model is writing");
    main.prepend(box);
  }
  const call = `${data.stage}#${data.attempt}#${data.call}`;
  if (box.dataset.call !== call) {
    box.dataset.call = call;
    box.dataset.stage = data.stage;
    box.textContent = "";
  }
  box.textContent += data.text;
}

function dropLiveText(stage) {
  const box = document.getElementById("live-text");
  if (box && (stage === undefined || box.dataset.stage === stage)) box.remove();
}

if (main && main.dataset.stream) {
  const after = main.dataset.after ? `?after=${encodeURIComponent(main.dataset.after)}` : "";
  const source = new EventSource(main.dataset.stream + after);
  source.addEventListener("event", (message) => {
    const event = JSON.parse(message.data);
    if (ENDS_ATTEMPT.has(event.type)) dropLiveText(event.stage);
    if (REDRAW_ON.has(event.type)) redraw();
  });
  source.addEventListener("token", (message) => showToken(JSON.parse(message.data)));
  source.addEventListener("abandoned", (message) => dropLiveText(JSON.parse(message.data).stage));
  source.addEventListener("end", () => { source.close(); dropLiveText(); redraw(); });
}

if (main && main.dataset.tasksStream) {
  const source = new EventSource(main.dataset.tasksStream);
  source.addEventListener("tasks", (message) => {
    if (JSON.parse(message.data).digest !== main.dataset.digest) redraw();
  });
}
