// Starts ReDoc on the API's reference page (/api/v1/redoc). A file of the site's own, not an inline
// script, so the page's Content-Security-Policy allows scripts from this site only.
window.addEventListener("load", () => {
  const root = document.getElementById("redoc");
  // ReDoc names each menu entry by its summary alone (aria-label) while it shows the method too
  // ("get Leaderboard"): a screen reader user hears other words than those on screen (axe-core's
  // label-content-name-mismatch). Such an entry is named by what it shows instead.
  const named = () => {
    for (const item of root.querySelectorAll("[role=menuitem][aria-label], li[aria-label]")) {
      const label = item.getAttribute("aria-label").trim().toLowerCase();
      if (!item.textContent.toLowerCase().replace(/\s+/g, " ").includes(label)) continue;
      if (item.textContent.trim().toLowerCase() !== label) item.removeAttribute("aria-label");
    }
  };
  new MutationObserver(named).observe(root, { subtree: true, childList: true, attributes: true, attributeFilter: ["aria-label"] });
  Redoc.init(root.dataset.openapi, { hideDownloadButton: false, expandResponses: "200" }, root, named);
});
