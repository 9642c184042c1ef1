"""Pure views of frames: text, one-line, JSON. They only read frames."""
