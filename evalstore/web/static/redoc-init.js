// Starts ReDoc on the API's reference page (/api/v1/redoc). A file of the site's own, not an inline
// script, so the page's Content-Security-Policy allows scripts from this site only.
window.addEventListener("load", () => {
  const root = document.getElementById("redoc");
  Redoc.init(root.dataset.openapi, { hideDownloadButton: false, expandResponses: "200" }, root);
});
