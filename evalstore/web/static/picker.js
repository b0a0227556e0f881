// The leaderboard's measure picker: type to filter its checkboxes (by the name shown or the stored
// one). Without this script the picker is the same form of grouped checkboxes, without the filter.
(function () {
  "use strict";
  for (const picker of document.querySelectorAll(".measure-picker")) {
    const filter = picker.querySelector(".measure-filter");
    if (!filter) continue;
    filter.hidden = false;
    picker.querySelector(".filter-label").hidden = false;
    const groups = Array.from(picker.querySelectorAll(".measure-group"));
    const opened = new Map(groups.map((g) => [g, g.open]));
    const none = picker.querySelector(".no-match");
    filter.addEventListener("input", () => {
      const words = filter.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
      let any = false;
      for (const group of groups) {
        let shown = 0;
        for (const item of group.querySelectorAll("li")) {
          const label = item.querySelector("label");
          const text = (label.textContent + " " + (label.title || "") + " " + group.dataset.family).toLowerCase();
          const hit = words.every((w) => text.includes(w));
          item.hidden = !hit;
          shown += hit ? 1 : 0;
        }
        group.hidden = shown === 0;
        group.open = words.length ? shown > 0 : opened.get(group);
        any = any || shown > 0;
      }
      if (none) none.hidden = any;
    });
    picker.addEventListener("toggle", () => { if (picker.open) filter.focus(); });
  }
})();
