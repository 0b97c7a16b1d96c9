/* schedsite web UI: small progressive enhancements on top of htmx. No build step. */
(function () {
  "use strict";

  // Live regions poll only while nobody is typing, choosing or ticking boxes inside them:
  // a poll swaps the region and would throw that work away. (Checked here, not in an
  // hx-trigger filter: htmx evaluates those as code, which the Content-Security-Policy forbids.)
  function idle(elt) {
    if (document.hidden) return false;
    // Older timeline entries someone loaded would vanish with the next poll.
    if (elt.querySelector("details[open], input[type=checkbox]:checked, [data-older]")) return false;
    // An action is on its way, or its result is still on show (see FLASH_MS).
    if (elt.classList.contains("htmx-request") || elt.querySelector(".htmx-request, .is-flash")) return false;
    var active = document.activeElement;
    if (active && elt.contains(active) && active.matches("input, select, textarea")) return false;
    return true;
  }
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var elt = evt.detail.elt;
    if (elt.classList.contains("live-region") && evt.detail.requestConfig.verb === "get" && !idle(elt)) {
      evt.preventDefault();
    }
  });

  // The phone's menu button shows and hides the navigation; the "Lab setup" drop-down closes
  // when one clicks elsewhere or presses Escape, as a menu does.
  document.addEventListener("click", function (evt) {
    var toggle = evt.target.closest(".nav-toggle");
    if (toggle) {
      var bar = toggle.closest(".topbar");
      var open = bar.classList.toggle("nav-open");
      toggle.setAttribute("aria-expanded", open ? "true" : "false");
      return;
    }
    document.querySelectorAll(".nav-more details[open]").forEach(function (menu) {
      if (!menu.contains(evt.target)) menu.removeAttribute("open");
    });
  });
  document.addEventListener("keydown", function (evt) {
    if (evt.key !== "Escape") return;
    document.querySelectorAll(".nav-more details[open]").forEach(function (menu) {
      menu.removeAttribute("open");
      menu.querySelector("summary").focus();
    });
  });

  // How long an action's result stays in its row before live updates may replace it.
  var FLASH_MS = 4000;
  document.addEventListener("htmx:afterSettle", function () {
    document.querySelectorAll(".is-flash:not([data-flash-timer])").forEach(function (el) {
      el.setAttribute("data-flash-timer", "");
      window.setTimeout(function () { el.classList.remove("is-flash"); }, FLASH_MS);
    });
  });

  function toast(message, ok) {
    var region = document.getElementById("toast");
    if (!region) return;
    var p = document.createElement("p");
    p.className = "toast " + (ok ? "toast-ok" : "toast-err");
    p.textContent = message;
    region.replaceChildren(p);
  }

  function connection(lost) {
    var banner = document.getElementById("connection");
    if (banner) banner.hidden = !lost;
  }

  // 400, 403, 409 and 429 answers carry their own message, which htmx swaps in (see the
  // htmx-config meta tag); anything else gets a plain-words toast.
  document.addEventListener("htmx:responseError", function (evt) {
    var status = evt.detail.xhr.status;
    if ([400, 403, 409, 422, 429].indexOf(status) >= 0) return;
    toast("The server answered " + status + " and nothing on this page changed. " +
      "Reload to see the current state.", false);
  });
  document.addEventListener("htmx:sendError", function () { connection(true); });
  document.addEventListener("htmx:afterRequest", function (evt) {
    if (evt.detail.xhr && evt.detail.xhr.status > 0) connection(false);
  });

  // After an action's answer is swapped in, put the keyboard where the user needs it: on an
  // element the server marked with data-focus (a new job row), else on the first field with
  // an error in what was swapped.
  document.addEventListener("htmx:afterSettle", function (evt) {
    var marked = document.querySelector("[data-focus]");
    if (marked) {
      marked.removeAttribute("data-focus");
      marked.focus();
      return;
    }
    var root = evt.target;
    if (!(root instanceof Element)) return;
    var invalid = root.matches("[aria-invalid=true]") ? root : root.querySelector("[aria-invalid=true]");
    if (invalid) invalid.focus();
  });

  function chooseSuggestion(button) {
    var wrap = button.closest(".suggest-wrap");
    var input = wrap && wrap.querySelector("input[data-suggest]");
    if (!input) return;
    var value = button.getAttribute("data-pick");
    if (input.getAttribute("data-suggest") === "token") {
      var parts = input.value.split(/[\s,]+/).filter(Boolean);
      if (input.value && !/[\s,]$/.test(input.value)) parts.pop(); // replace the half-typed word
      if (parts.indexOf(value) < 0) parts.push(value);
      input.value = parts.join(" ") + " ";
    } else {
      input.value = value;
    }
    clearSuggestions(wrap);
    input.focus();
    input.dispatchEvent(new Event("change", { bubbles: true }));
  }

  function clearSuggestions(wrap) {
    var box = wrap && wrap.querySelector(".suggestions");
    if (box) box.replaceChildren();
  }

  function updateSelection() {
    var form = document.getElementById("bulk-form");
    if (!form) return;
    var n = document.querySelectorAll("input[form=bulk-form][name=hosts]:checked").length;
    var count = form.querySelector("[data-selected-count]");
    if (count) count.textContent = n === 1 ? "1 host selected" : n + " hosts selected";
    form.classList.toggle("has-selection", n > 0);
  }

  document.addEventListener("click", function (evt) {
    var el = evt.target instanceof Element ? evt.target : null;
    if (!el) return;
    var pick = el.closest("[data-pick]");
    if (pick) { chooseSuggestion(pick); return; }

    var dropRole = el.closest("[data-remove-role]");
    if (dropRole) {
      var roleRow = dropRole.closest(".role-row");
      var details = roleRow.closest(".job-hosts");
      roleRow.remove();
      var addRole = details && details.querySelector(".role-actions .btn");
      if (addRole) addRole.focus();
      return;
    }

    var remove = el.closest("[data-remove-row]");
    if (remove) {
      var row = remove.closest(".job-row");
      var next = row.nextElementSibling || row.previousElementSibling;
      row.remove();
      var focus = next ? next.querySelector("input") : document.getElementById("add-job");
      if (focus) focus.focus();
      return;
    }

    var chip = el.closest("[data-remove-chip]");
    if (chip) {
      var form = chip.closest("form");
      chip.closest(".chip").remove();
      if (form) form.requestSubmit();
      return;
    }

    var copy = el.closest("[data-copy]");
    if (copy) {
      var source = document.querySelector(copy.getAttribute("data-copy"));
      if (!source) return;
      var done = function () { toast("Copied to the clipboard.", true); };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(source.value).then(done);
      } else {
        source.select();
        document.execCommand("copy");
        done();
      }
    }
  });

  // A filter box with suggestions applies on Enter or on a picked suggestion, not on blur:
  // leaving it half-typed (to click a suggestion) must not filter by the half-typed word.
  document.addEventListener("change", function (evt) {
    var el = evt.target;
    if (evt.isTrusted && el instanceof HTMLInputElement && el.matches("form[role=search] [data-suggest]")) {
      evt.stopPropagation();
    }
  }, true);

  document.addEventListener("change", function (evt) {
    var el = evt.target;
    if (!(el instanceof HTMLInputElement)) return;
    if (el.matches("[data-select-all]")) {
      var table = el.closest("table");
      table.querySelectorAll("input[name=hosts]").forEach(function (box) { box.checked = el.checked; });
      updateSelection();
    } else if (el.matches("input[form=bulk-form][name=hosts]")) {
      updateSelection();
    }
  });
  document.addEventListener("htmx:afterSettle", updateSelection);

  // Keyboard for the suggestion lists: Down/Up move through them, Escape closes them.
  document.addEventListener("keydown", function (evt) {
    var el = evt.target instanceof Element ? evt.target : null;
    var wrap = el && el.closest(".suggest-wrap");
    if (!wrap) return;
    var options = Array.prototype.slice.call(wrap.querySelectorAll("[data-pick]"));
    if (evt.key === "Escape") {
      if (options.length) { evt.preventDefault(); clearSuggestions(wrap); }
      var input = wrap.querySelector("input[data-suggest]");
      if (input && el !== input) input.focus();
      return;
    }
    if (evt.key !== "ArrowDown" && evt.key !== "ArrowUp") return;
    if (!options.length) return;
    evt.preventDefault();
    var index = options.indexOf(el);
    if (evt.key === "ArrowDown") index = index < 0 ? 0 : Math.min(index + 1, options.length - 1);
    else index = index <= 0 ? -1 : index - 1;
    if (index < 0) wrap.querySelector("input[data-suggest]").focus();
    else options[index].focus();
  });
  // A suggestion list answering after its field was left would stay open over the next one.
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var target = evt.detail.target;
    var wrap = target && target.classList && target.classList.contains("suggestions")
      ? target.closest(".suggest-wrap") : null;
    if (wrap && !wrap.contains(document.activeElement)) evt.detail.shouldSwap = false;
  });
  document.addEventListener("focusout", function (evt) {
    var wrap = evt.target instanceof Element ? evt.target.closest(".suggest-wrap") : null;
    if (wrap && !(evt.relatedTarget && wrap.contains(evt.relatedTarget))) {
      // Let a click on a suggestion land before the list goes away.
      window.setTimeout(function () {
        if (!wrap.contains(document.activeElement)) clearSuggestions(wrap);
      }, 150);
    }
  });
})();
