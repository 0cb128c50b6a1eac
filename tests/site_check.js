// Injected into a built page by tests/docs/test_site.py: reports what a reader would see as wrong.
window.addEventListener("load", () => {
  const report = { overflowing: [], rawMermaid: [], images: [], emptyHeaders: 0, codeBlocks: 0, charsPerLine: 0 };
  for (const code of document.querySelectorAll("pre > code")) {
    report.codeBlocks += 1;
    const pre = code.parentElement;
    if (code.scrollWidth > code.clientWidth + 1 || pre.scrollWidth > pre.clientWidth + 1) {
      const longest = code.textContent.split("\n").reduce((a, b) => (b.length > a.length ? b : a), "");
      report.overflowing.push(longest);
    }
  }
  const probe = document.querySelector("pre > code");
  if (probe) {
    const span = document.createElement("span");
    span.textContent = "x".repeat(100);
    probe.appendChild(span);
    const charWidth = span.getBoundingClientRect().width / 100;
    const style = getComputedStyle(probe);
    const inner = probe.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    report.charsPerLine = Math.floor(inner / charWidth);
    span.remove();
  }
  for (const element of document.querySelectorAll(".mermaid, pre, code")) {
    if (/^\s*(stateDiagram|flowchart|graph|sequenceDiagram)\b/.test(element.textContent)) {
      report.rawMermaid.push(element.textContent.slice(0, 60));
    }
  }
  for (const image of document.querySelectorAll("article img")) {
    report.images.push({ src: image.getAttribute("src"), loaded: image.complete && image.naturalWidth > 0 });
  }
  for (const row of document.querySelectorAll("thead tr")) {
    if ([...row.children].every((cell) => cell.textContent.trim() === "")) report.emptyHeaders += 1;
  }
  document.documentElement.dataset.siteCheck = JSON.stringify(report);
});
