// Keyboard assessing: one key per label (the form's data-keys: s p n on the nugget page, 2 1 0 on
// the support page) labels the current item and moves to the next one not labelled; Up/Down
// (or k/j) move between items, so a label is revised before the answer is saved; Enter saves.
// Each label's time (from the page's showing, or the label before) goes with it. The page works
// without this file: every label is a radio button, and Save a button.
(function () {
  "use strict";
  var form = document.getElementById("assess-form");
  if (!form) return;
  var items = Array.prototype.slice.call(form.querySelectorAll(".item"));
  var status = document.getElementById("assess-status");
  var keys = (form.dataset.keys || "").split(" ");
  var last = performance.now();
  var current = 0;
  var sent = false;

  function labelled(item) { return item.querySelector("input[type=radio]:checked") !== null; }

  function show(index) {
    if (!items.length) return;
    current = Math.max(0, Math.min(items.length - 1, index));
    items.forEach(function (item, i) { item.classList.toggle("current", i === current); });
    var box = items[current].getBoundingClientRect();
    if (box.top < 0 || box.bottom > window.innerHeight) items[current].scrollIntoView({ block: "center" });
  }

  function nextOpen(from) {
    for (var i = 1; i <= items.length; i++) {
      var j = (from + i) % items.length;
      if (!labelled(items[j])) return j;
    }
    return Math.min(from + 1, items.length - 1);
  }

  function label(key) {
    var item = items[current];
    var input = item.querySelector('input[data-key="' + CSS.escape(key) + '"]');
    if (!input) return;
    var now = performance.now();
    var seconds = item.querySelector('input[name^="seconds_"]');
    if (seconds && !seconds.value) seconds.value = ((now - last) / 1000).toFixed(3);
    last = now;
    input.checked = true;
    if (status) status.textContent = "";
    show(nextOpen(current));
  }

  items.forEach(function (item, i) {
    item.addEventListener("change", function () {
      var seconds = item.querySelector('input[name^="seconds_"]');
      var now = performance.now();
      if (seconds && !seconds.value) seconds.value = ((now - last) / 1000).toFixed(3);
      last = now;
      show(i);
    });
  });

  form.addEventListener("submit", function (event) {
    var open = items.filter(function (item) { return !labelled(item); });
    if (open.length && form.dataset.keys === "s p n") {
      event.preventDefault();
      if (status) status.textContent = open.length + " still without a label: label every nugget before saving.";
      show(items.indexOf(open[0]));
      return;
    }
    if (sent) { event.preventDefault(); return; }
    sent = true;
  });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var tag = event.target.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT" || (tag === "INPUT" && event.target.type !== "radio")) return;
    var key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
    if (keys.indexOf(key) >= 0) { label(key); event.preventDefault(); return; }
    if (key === "ArrowDown" || key === "j") { show(current + 1); event.preventDefault(); return; }
    if (key === "ArrowUp" || key === "k") { show(current - 1); event.preventDefault(); return; }
    if (key === "Enter" && tag !== "BUTTON" && tag !== "A" && tag !== "SUMMARY") {
      event.preventDefault();
      form.requestSubmit(document.getElementById("save"));
    }
  });

  show(items.findIndex ? Math.max(0, items.findIndex(function (item) { return !labelled(item); })) : 0);
})();
