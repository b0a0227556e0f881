// Times in the reader's own time zone. The server writes UTC ("2026-12-01 12:00 UTC" in a
// <time datetime=...>, UTC in a datetime-local field); without this script the page stays in UTC.
(function () {
  "use strict";
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "your time zone";
  // the zone said with every time ("GMT+1", "UTC"): a time without one is a guess for the reader
  // (dateStyle and timeStyle cannot take timeZoneName, hence the fields one by one)
  const shown = {
    year: "numeric", month: "short", day: "numeric", hour: "numeric", minute: "2-digit", timeZoneName: "short",
  };
  for (const t of document.querySelectorAll("time[datetime]")) {
    const when = new Date(t.getAttribute("datetime"));
    if (!isNaN(when)) {
      t.title = t.textContent.trim();  // the UTC text, on hover
      t.textContent = when.toLocaleString([], shown);
    }
  }
  const pad = (n) => String(n).padStart(2, "0");
  const local = (d) =>
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
  // a datetime-local field with a companion "<name>_offset" field: shown in local time, and sent
  // with the offset of the moment typed (minutes east of UTC; daylight saving changes it)
  for (const field of document.querySelectorAll("input[type=datetime-local][data-offset]")) {
    const offset = document.getElementById(field.dataset.offset);
    if (!offset) continue;
    if (field.value && !offset.value) {  // a stored time, in UTC: show it in local time
      const when = new Date(field.value + "Z");
      if (!isNaN(when)) field.value = local(when);
    }
    for (const note of document.querySelectorAll(`[data-zone-of="${field.id}"]`)) note.textContent = `(${zone})`;
    const record = () => {
      const when = new Date(field.value);
      offset.value = field.value && !isNaN(when) ? String(-when.getTimezoneOffset()) : "";
    };
    record();
    field.addEventListener("change", record);
    if (field.form) field.form.addEventListener("submit", record);
  }
})();
