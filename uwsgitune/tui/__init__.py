"""The `uwsgitune watch` terminal UI (Textual). Only this package imports textual.

Data flows one way: poll threads build frozen `Snapshot`s, the app assigns them to the
instance panes' reactives, and pure view functions (`summary`, `workers`, `history`,
`detail`, `warnings`) turn them into rows and renderables.
"""
