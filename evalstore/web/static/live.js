// Live state of queued and running evaluations: an element with data-live-job="ID" and the state
// "queued" or "running" in data-state is followed by asking /jobs/live (one small query on the
// server) and its parts are rewritten in place: [data-live=state], [data-live=position] (the place
// in the queue; data-format="... {} ..." words it, data-none what shows without one) and
// [data-live=error]. The asking backs off from 2 s to 30 s while nothing changes, pauses while the
// tab is hidden, stops when nothing is pending or after an hour; without this script a reload
// shows the same state. Elements with data-live-when-done are shown once a followed job is done.
(function () {
  "use strict";
  const FIRST = 2000, LONGEST = 30000, GROWTH = 1.6, GIVE_UP = 60 * 60 * 1000;
  const PENDING = ["queued", "running"];
  const started = Date.now();
  let wait = FIRST, timer = null;

  const followed = () =>
    Array.from(document.querySelectorAll("[data-live-job]")).filter((e) => PENDING.includes(e.dataset.state));

  const note = document.getElementById("live-note");
  const say = (text) => { if (note) note.textContent = text; };

  function show(element, job) {
    element.dataset.state = job.state;
    for (const part of element.querySelectorAll("[data-live=state]")) {
      part.textContent = job.state;
      part.className = part.className.replace(/\bstate-\S+/g, "").trim() + ` state-${job.state}`;
    }
    for (const part of element.querySelectorAll("[data-live=position]")) {
      const format = part.dataset.format || "{}";
      part.textContent = job.queue_position ? format.replace("{}", job.queue_position) : (part.dataset.none || "");
    }
    for (const part of element.querySelectorAll("[data-live=error]")) {
      part.textContent = job.error || "";
      part.hidden = !job.error;
    }
    if (job.state === "done") {
      for (const shown of document.querySelectorAll("[data-live-when-done]")) shown.hidden = false;
    }
  }

  async function poll() {
    timer = null;
    const elements = followed();
    if (!elements.length || Date.now() - started > GIVE_UP) return;
    if (document.hidden) return;  // asked again when the tab is shown
    const ids = Array.from(new Set(elements.map((e) => e.dataset.liveJob))).slice(0, 100);
    let changed = false;
    try {
      const answer = await fetch("/jobs/live?" + ids.map((id) => "job=" + encodeURIComponent(id)).join("&"), {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      if (!answer.ok || answer.redirected) return;  // signed out, or refused: the page stays as it was
      const { jobs } = await answer.json();
      const byId = new Map(jobs.map((j) => [String(j.id), j]));
      for (const element of elements) {
        const job = byId.get(element.dataset.liveJob);
        if (!job) continue;
        const before = element.dataset.state + "/" + (element.dataset.position || "");
        show(element, job);
        element.dataset.position = job.queue_position || "";
        if (before !== job.state + "/" + (job.queue_position || "")) {
          changed = true;
          const name = element.dataset.liveName;
          if (name && !PENDING.includes(job.state)) say(`${name}: ${job.state}`);
        }
      }
    } catch (error) {
      // the network is down: keep backing off
    }
    wait = changed ? FIRST : Math.min(LONGEST, wait * GROWTH);
    schedule();
  }

  function schedule() {
    if (timer === null && followed().length) timer = setTimeout(poll, wait);
  }

  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && timer === null) { wait = FIRST; schedule(); }
  });
  schedule();
})();
