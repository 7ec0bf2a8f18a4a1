// zsl-harness leaderboard: sortable and filterable tables, the comparison picker, and the
// switch between rankings that keep transductive submissions apart and one ranking of all.
// Progressive enhancement only: without this file every table is complete and in rank order.
// It reads data-* attributes and moves existing elements; it never parses markup (no innerHTML),
// never evaluates strings, and binds events with addEventListener (the CSP forbids inline code).
"use strict";

(function () {
  document.documentElement.classList.add("js");

  function sortValue(cell, type) {
    var raw = cell ? cell.getAttribute("data-sort") : null;
    if (raw === null || raw === "") {
      return null; // missing values sort last in either direction
    }
    if (type === "num") {
      var number = Number(raw);
      return Number.isFinite(number) ? number : null;
    }
    return raw.toLowerCase();
  }

  function compareValues(a, b, type) {
    if (type === "num") {
      return a - b;
    }
    return a < b ? -1 : a > b ? 1 : 0;
  }

  function sortTable(table, header, direction) {
    var body = table.tBodies[0];
    var index = header.cellIndex;
    var type = header.getAttribute("data-sort-type") || "text";
    var rows = Array.prototype.slice.call(body.rows);
    var keyed = rows.map(function (row, position) {
      return { row: row, value: sortValue(row.cells[index], type), position: position };
    });
    var sign = direction === "ascending" ? 1 : -1;
    keyed.sort(function (a, b) {
      if (a.value === null || b.value === null) {
        if (a.value === b.value) {
          return a.position - b.position;
        }
        return a.value === null ? 1 : -1;
      }
      var order = sign * compareValues(a.value, b.value, type);
      return order !== 0 ? order : a.position - b.position; // stable
    });
    keyed.forEach(function (item) {
      body.appendChild(item.row);
    });
    Array.prototype.forEach.call(header.parentNode.cells, function (cell) {
      if (cell !== header && cell.hasAttribute("data-sort-type")) {
        cell.setAttribute("aria-sort", "none");
      }
    });
    header.setAttribute("aria-sort", direction);
  }

  function makeSortable(table) {
    var head = table.tHead;
    if (!head || !table.tBodies.length) {
      return;
    }
    // The last header row has one cell per column (a row of group headers may sit above it),
    // so a header's cellIndex is its column's.
    Array.prototype.forEach.call(head.rows[head.rows.length - 1].cells, function (header) {
      if (!header.hasAttribute("data-sort-type")) {
        return;
      }
      if (!header.hasAttribute("aria-sort")) {
        header.setAttribute("aria-sort", "none");
      }
      var button = document.createElement("button");
      button.type = "button";
      button.className = "sort-button";
      while (header.firstChild) {
        button.appendChild(header.firstChild);
      }
      header.appendChild(button);
      button.addEventListener("click", function (event) {
        if (event.target.closest("a")) {
          return; // a link inside a header (a benchmark's page) keeps working
        }
        var current = header.getAttribute("aria-sort");
        var first = header.getAttribute("data-sort-first") === "desc" ? "descending" : "ascending";
        var next;
        if (current === "ascending") {
          next = "descending";
        } else if (current === "descending") {
          next = "ascending";
        } else {
          next = first;
        }
        sortTable(table, header, next);
      });
    });
  }

  // Every filter bar's apply(): a switch of rankings shows other tables, whose counts change.
  var filterUpdates = [];

  function makeFilterable(bar) {
    // data-filter-for: the ids of the tables it filters (a setting's tables: inductive,
    // transductive, all together); the count covers the ones on display.
    var tables = (bar.getAttribute("data-filter-for") || "").split(" ").map(function (id) {
      return document.getElementById(id);
    }).filter(function (table) { return table && table.tBodies.length; });
    if (!tables.length) {
      return;
    }
    var text = bar.querySelector(".filter-text");
    var flags = Array.prototype.slice.call(bar.querySelectorAll(".filter-flag"));
    var count = bar.querySelector(".filter-count");
    function apply() {
      var needle = text ? text.value.trim().toLowerCase() : "";
      var hidden = flags.filter(function (box) { return box.checked; }).map(function (box) {
        return box.value;
      });
      var shown = 0;
      var total = 0;
      tables.forEach(function (table) {
        var displayed = table.closest("[hidden]") === null;
        Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
          var name = row.getAttribute("data-name") || "";
          var rowFlags = (row.getAttribute("data-flags") || "").split(" ");
          var hide = (needle !== "" && name.indexOf(needle) === -1) ||
            hidden.some(function (flag) { return rowFlags.indexOf(flag) !== -1; });
          row.hidden = hide;
          if (displayed) {
            total += 1;
            shown += hide ? 0 : 1;
          }
        });
      });
      if (count) {
        count.textContent = shown + " of " + total + " shown";
      }
    }
    if (text) {
      text.addEventListener("input", apply);
    }
    flags.forEach(function (box) { box.addEventListener("change", apply); });
    filterUpdates.push(apply);
    apply();
  }

  // A checkbox that swaps the rankings that keep transductive submissions apart (data-apart)
  // for the ranking of every submission together (data-combined). Without the script the
  // combined ranking is an anchor (#combined-…) that CSS shows only when targeted.
  function makeCombineToggle(box) {
    var combined = document.getElementById(box.getAttribute("data-combined"));
    var apart = document.getElementById(box.getAttribute("data-apart"));
    if (!combined || !apart) {
      return;
    }
    function show(together) {
      box.checked = together;
      combined.hidden = !together;
      apart.hidden = together;
      filterUpdates.forEach(function (apply) { apply(); });
    }
    function fromAddress() {
      var id = decodeURIComponent(window.location.hash.slice(1));
      var target = id ? document.getElementById(id) : null;
      if (target && (target === combined || combined.contains(target))) {
        show(true);
      } else if (target && apart.contains(target)) {
        show(false);
      }
    }
    box.addEventListener("change", function () { show(box.checked); });
    window.addEventListener("hashchange", fromAddress);
    show(false);
    fromAddress();
  }

  // A column chooser: one checkbox per column group (data-columns-for: the ids of the tables
  // it governs). An unchecked group's columns get hidden by a class on each table
  // (hide-<group>, style.css); without the script every column shows. The boxes' initial
  // state is the page's default (lower-priority groups unchecked on wide tables).
  function makeColumnChooser(chooser) {
    var tables = (chooser.getAttribute("data-columns-for") || "").split(" ").map(function (id) {
      return document.getElementById(id);
    }).filter(function (table) { return table !== null; });
    var boxes = Array.prototype.slice.call(chooser.querySelectorAll("input.column-group"));
    function apply() {
      boxes.forEach(function (box) {
        tables.forEach(function (table) {
          table.classList.toggle("hide-" + box.value, !box.checked);
          // An unchecked group keeps its lead column: its header spans just that one (or,
          // over a run of its columns without the lead, none, and hides).
          Array.prototype.forEach.call(table.querySelectorAll("th.cg-head.cg-" + box.value), function (head) {
            var span = Number(box.checked ? head.getAttribute("data-span") : head.getAttribute("data-lead-span"));
            head.hidden = span === 0;
            head.colSpan = Math.max(span, 1);
          });
        });
      });
    }
    boxes.forEach(function (box) { box.addEventListener("change", apply); });
    apply();
  }

  function setUpComparison(form) {
    var first = document.getElementById("compare-a");
    var second = document.getElementById("compare-b");
    var message = document.getElementById("compare-message");
    var pages = new Map();
    Array.prototype.forEach.call(document.querySelectorAll("a[data-a][data-b]"), function (link) {
      pages.set(link.getAttribute("data-a") + "\n" + link.getAttribute("data-b"), link);
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var a = first.value;
      var b = second.value;
      if (a === b) {
        message.textContent = "Pick two different submissions.";
        return;
      }
      var link = pages.get(a + "\n" + b) || pages.get(b + "\n" + a);
      if (!link) {
        message.textContent = "These two submissions share no benchmark.";
        return;
      }
      message.textContent = "";
      window.location.assign(link.href);
    });
  }

  function start() {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), makeSortable);
    Array.prototype.forEach.call(document.querySelectorAll(".filters[data-filter-for]"), makeFilterable);
    Array.prototype.forEach.call(document.querySelectorAll("input.combine-toggle"), makeCombineToggle);
    Array.prototype.forEach.call(document.querySelectorAll(".column-chooser[data-columns-for]"), makeColumnChooser);
    var form = document.getElementById("compare-form");
    if (form) {
      setUpComparison(form);
    }
  }

  // Copy buttons (submission pages' BibTeX): hidden without the script, which shows them.
  function makeCopyButton(button) {
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) {
      return;
    }
    button.hidden = false;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(source.textContent).then(
        function () { button.textContent = "Copied"; },
        function () { button.textContent = "Copy failed: select the text"; }
      );
    });
  }

  function startCopyButtons() {
    Array.prototype.forEach.call(document.querySelectorAll("button.copy-button[data-copy]"), makeCopyButton);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", startCopyButtons);
  } else {
    startCopyButtons();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
