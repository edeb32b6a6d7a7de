"""The scorers' prompts: module constants, pure ``render_*`` functions with keyword-only arguments, and the pydantic
models the judge's answers must fit. One module per scorer; scoring logic never holds a prompt string."""
