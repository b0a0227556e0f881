// Keyboard judging: one key per grade, s skip, n note, u undo. The page works without this file
// (every key is a button); the script only presses the buttons.
(function () {
  "use strict";
  var form = document.getElementById("judge-form");
  var undo = document.getElementById("undo-form");
  var note = document.getElementById("note");
  var noteBox = document.getElementById("note-box");
  var sent = false;

  function press(button) {
    if (!button || button.disabled || sent) return;
    sent = true; // one judgment per document: a held key must not judge the next one unseen
    form.requestSubmit(button);
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target === note) {
      if (event.key === "Escape") { note.blur(); event.preventDefault(); }
      return;
    }
    if (event.target.tagName === "INPUT" || event.target.tagName === "SELECT" || event.target.tagName === "TEXTAREA") return;
    var key = event.key.toLowerCase();
    if (key === "u" && undo) {
      var button = undo.querySelector("button");
      if (button && !button.disabled && !sent) { sent = true; undo.requestSubmit(); }
      event.preventDefault();
      return;
    }
    if (!form) return;
    if (key === "n" && noteBox) {
      noteBox.open = true;
      note.focus();
      event.preventDefault();
      return;
    }
    var target = form.querySelector('button[data-key="' + CSS.escape(key) + '"]');
    if (target) { press(target); event.preventDefault(); }
  });
})();
