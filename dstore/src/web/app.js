// dstore's web view: search, keyboard navigation and live updates of a
// plan's tree. Pages read without it; it only adds interaction.
"use strict";
(function () {
  const tree = document.getElementById("tree");
  if (!tree) return;
  const search = document.getElementById("search");
  const live = document.getElementById("live");
  let current = null;

  // A row is shown unless the search hid it or a closed decision above
  // folds it (asked of the DOM, not the layout: rows out of view are not laid out).
  function shownRow(a) {
    return !a.closest("li.hidden") && !a.closest("details:not([open]) > ul");
  }

  function rows() {
    return Array.from(tree.querySelectorAll("a.row")).filter(shownRow);
  }

  function setCurrent(a) {
    if (current) current.classList.remove("current");
    current = a;
    if (a) {
      a.classList.add("current");
      a.scrollIntoView({ block: "nearest" });
    }
  }

  function applySearch() {
    const q = (search.value || "").trim().toLowerCase();
    const items = tree.querySelectorAll("li");
    if (!q) {
      items.forEach((li) => li.classList.remove("hidden", "match"));
      return;
    }
    // A match shows itself and its ancestors; the rest are hidden.
    items.forEach((li) => li.classList.add("hidden"));
    items.forEach((li) => li.classList.remove("match"));
    tree.querySelectorAll("a.row").forEach((a) => {
      if (!a.dataset.search.includes(q)) return;
      let li = a.closest("li");
      li.classList.add("match");
      while (li) {
        li.classList.remove("hidden");
        const d = li.querySelector(":scope > details");
        if (d && li !== a.closest("li")) d.open = true;
        li = li.parentElement.closest("li");
      }
    });
  }

  let timer = null;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(applySearch, 120);
  });

  document.getElementById("expand").addEventListener("click", () => {
    tree.querySelectorAll("details").forEach((d) => (d.open = true));
  });
  document.getElementById("collapse").addEventListener("click", () => {
    tree.querySelectorAll("details").forEach((d) => (d.open = false));
  });

  document.addEventListener("keydown", (e) => {
    if (e.target === search) {
      if (e.key === "Escape") search.blur();
      return;
    }
    if (e.target.tagName === "INPUT" || e.ctrlKey || e.metaKey || e.altKey) return;
    const shown = rows();
    const at = current ? shown.indexOf(current) : -1;
    const details = current ? current.closest("details") : null;
    const own = details && details.querySelector(":scope > summary a.row") === current ? details : null;
    switch (e.key) {
      case "/":
        e.preventDefault();
        search.focus();
        break;
      case "j":
      case "ArrowDown":
        e.preventDefault();
        setCurrent(shown[Math.min(at + 1, shown.length - 1)] || null);
        break;
      case "k":
      case "ArrowUp":
        e.preventDefault();
        setCurrent(shown[Math.max(at - 1, 0)] || null);
        break;
      case "ArrowLeft":
      case "h":
        if (!current) return;
        e.preventDefault();
        if (own && own.open) {
          own.open = false;
        } else {
          // To the parent's row.
          const li = current.closest("li").parentElement.closest("li");
          if (li) setCurrent(li.querySelector(":scope > details > summary a.row"));
        }
        break;
      case "ArrowRight":
      case "l":
        if (own) {
          e.preventDefault();
          own.open = true;
        }
        break;
      case "Enter":
        if (current) {
          e.preventDefault();
          window.location.href = current.getAttribute("href");
        }
        break;
    }
  });

  // A click on a row's link inside a summary follows the link; elsewhere
  // on the summary it toggles, as details do.

  // Live: decisions recorded while the page is open appear without a reload
  // (a count polled twice a second: one small read for the server).
  const POLL_MS = 500;
  const plan = tree.dataset.plan;
  let count = Number(tree.dataset.count);
  const effective = tree.dataset.effective === "1" ? "&effective=1" : "";
  async function poll() {
    try {
      const r = await fetch("/api/plan/" + plan + "/count", { credentials: "same-origin" });
      if (r.ok) {
        const now = (await r.json()).decisions;
        if (now !== count) {
          const page = await fetch("/plan/" + plan + "?fragment=tree" + effective, { credentials: "same-origin" });
          if (page.ok) {
            const closed = new Set(
              Array.from(tree.querySelectorAll("details:not([open])")).map((d) => d.parentElement.id)
            );
            const currentId = current ? current.closest("li").id : null;
            tree.innerHTML = await page.text();
            tree.querySelectorAll("details").forEach((d) => {
              if (closed.has(d.parentElement.id)) d.open = false;
            });
            if (currentId) {
              const li = document.getElementById(currentId);
              current = null;
              if (li) setCurrent(li.querySelector("a.row"));
            }
            applySearch();
            const added = now - count;
            count = now;
            tree.dataset.count = String(now);
            live.textContent = (added > 0 ? added + " new" : "updated") + " · " + now + " decisions";
          }
        }
      }
    } catch (_) {
      // The server is away for a moment: try again on the next tick.
    }
    setTimeout(poll, POLL_MS);
  }
  setTimeout(poll, POLL_MS);
})();
