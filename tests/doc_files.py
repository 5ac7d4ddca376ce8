"""Tiny documents in the formats users keep, written at test time with the libraries of the dev
extra: a 2-page PDF with an outline, a locked PDF, a PDF with no text layer, an HTML page, a
DOCX with heading styles, a PPTX. Nothing here is committed as a binary file."""

from __future__ import annotations

import warnings
from pathlib import Path

LIGHTHOUSE = "The Varn lighthouse was built in 1871 by the Keller company."
SHIPS = "The keeper counted 412 ships in the first winter."
LAMP = "The lamp burned colza oil until 1890."
STORMS = "Three ships ran aground in the winter of 1880."
BUDGET = "Oil for the lamp cost 40 pounds a year."


def _pdf():
    from fpdf import FPDF

    warnings.filterwarnings("ignore", category=DeprecationWarning, module="fpdf")
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    return pdf


def _line(pdf, text: str) -> None:
    pdf.multi_cell(0, 8, text, new_x="LMARGIN", new_y="NEXT")


def report_pdf(path: Path) -> Path:
    """Two pages, titled "Annual report": page 1 under the outline entry "History" (with a line
    that reads as Markdown), page 2 the end of History and then "Results"."""
    pdf = _pdf()
    pdf.set_title("Annual report")
    pdf.add_page()
    pdf.start_section("History")
    _line(pdf, f"History\n{LIGHTHOUSE}\n# of keepers: 3\n---")
    pdf.add_page()
    _line(pdf, "The tower was painted red in 1902.")
    pdf.start_section("Results")
    _line(pdf, f"Results\n{SHIPS}")
    pdf.output(str(path))
    return path


def manual_pdf(path: Path, pages: int = 4) -> Path:
    """`pages` pages, each with the running header "Varn lighthouse manual" and its page number
    at the foot, and one fact of its own ("Rule N: ...")."""
    from fpdf import FPDF

    class Manual(FPDF):
        def header(self):
            self.cell(0, 8, "Varn lighthouse manual", new_x="LMARGIN", new_y="NEXT")

        def footer(self):
            self.set_y(-15)
            self.cell(0, 8, str(self.page_no()))

    warnings.filterwarnings("ignore", category=DeprecationWarning, module="fpdf")
    pdf = Manual()
    pdf.set_font("Helvetica", size=12)
    for n in range(1, pages + 1):
        pdf.add_page()
        _line(pdf, f"Rule {n}: the keeper logs the weather at {n} o'clock.")
    pdf.output(str(path))
    return path


def locked_pdf(path: Path) -> Path:
    pdf = _pdf()
    pdf.add_page()
    _line(pdf, "A secret.")
    pdf.set_encryption(owner_password="owner", user_password="reader")
    pdf.output(str(path))
    return path


def scanned_pdf(path: Path) -> Path:
    """A page with a drawing and no text: what a scan without OCR gives."""
    pdf = _pdf()
    pdf.add_page()
    pdf.rect(20, 20, 100, 60)
    pdf.output(str(path))
    return path


def guide_html(path: Path) -> Path:
    path.write_text(
        "<html><head><title>Keeper's guide</title><script>var tracking = 1;</script>"
        "<style>h1 {color: red}</style></head><body><nav><a href='/'>Home</a> | <a href='next.html'>Next</a></nav>"
        "<main><h1>Keeper's guide</h1><p>Read this first.</p>"
        f"<h2>The lamp</h2><p>{LAMP}</p><h3>Cleaning</h3><p>Clean the <a href='lens.html'>lens</a> daily.</p>"
        "<pre><code>polish --lens --gentle</code></pre></main></body></html>",
        encoding="utf-8",
    )
    return path


def storms_docx(path: Path) -> Path:
    import docx

    d = docx.Document()
    d.add_heading("Storm log", level=1)
    d.add_paragraph("Kept by the keeper.")
    d.add_heading("Winter 1880", level=2)
    d.add_paragraph(STORMS)
    d.save(str(path))
    return path


def budget_pptx(path: Path) -> Path:
    from pptx import Presentation

    deck = Presentation()
    deck.core_properties.title = "Lighthouse budget"
    slide = deck.slides.add_slide(deck.slide_layouts[1])  # title and content
    slide.shapes.title.text = "Costs"
    slide.placeholders[1].text = BUDGET
    slide.notes_slide.notes_text_frame.text = "Prices of 1875."
    deck.save(str(path))
    return path
