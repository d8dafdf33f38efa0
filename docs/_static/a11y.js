// Name the theme's icon-only <summary> toggles (the navigation's expand arrows), which screen
// readers otherwise announce without a label (axe-core: summary-name).
document.addEventListener("DOMContentLoaded", () => {
  for (const summary of document.querySelectorAll("summary")) {
    if (!summary.textContent.trim() && !summary.hasAttribute("aria-label")) {
      summary.setAttribute("aria-label", "Expand or collapse this section");
    }
  }
});
