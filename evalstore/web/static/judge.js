// Keyboard judging: one key per grade, s skip, n note, u undo, l the list of one's judgments;
// j/k, Space/Shift+Space and Page Down/Up scroll the document's text without a click (the text
// is focused when the page opens). The page works without this file (every key is a button or
// a link, and the text is a focusable scroll region); the script only presses them.
(function () {
  "use strict";
  var form = document.getElementById("judge-form");
  var undo = document.getElementById("undo-form");
  var note = document.getElementById("note");
  var noteBox = document.getElementById("note-box");
  var text = document.getElementById("doc-text");
  var list = document.getElementById("judgments-link");
  var sent = false;
  var LINE = 48; // px per j/k press: about two lines

  if (text) text.focus({ preventScroll: true });

  function press(button) {
    if (!button || button.disabled || sent) return;
    sent = true; // one judgment per document: a held key must not judge the next one unseen
    form.requestSubmit(button);
  }

  function scrollText(delta) {
    var box = text.getBoundingClientRect();
    if (box.bottom < 0 || box.top > window.innerHeight) text.scrollIntoView({ block: "nearest" });
    text.scrollBy({ top: delta, behavior: "instant" });
  }

  function pageStep() { return Math.max(LINE, text.clientHeight - 2 * LINE); }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target === note) {
      if (event.key === "Escape") { note.blur(); event.preventDefault(); }
      return;
    }
    var tag = event.target.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    var key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
    if (text && (key === "j" || key === "k")) {
      scrollText(key === "j" ? LINE : -LINE);
      event.preventDefault();
      return;
    }
    if (text && (key === " " || key === "PageDown" || key === "PageUp")) {
      // a focused button or link is pressed by Space; elsewhere (the text itself included: the
      // browser's own smooth scroll of a focused region lags) the text moves by a page at once
      if (tag === "BUTTON" || tag === "A" || tag === "SUMMARY") return;
      scrollText((key === "PageUp" || (key === " " && event.shiftKey)) ? -pageStep() : pageStep());
      event.preventDefault();
      return;
    }
    if (key === "l" && list) {
      if (!sent) { sent = true; window.location.assign(list.href); }
      event.preventDefault();
      return;
    }
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
