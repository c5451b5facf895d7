"""A small offline catalog: 36 items in 6 genres, each with a price, a popularity and a rating.

Item ids are the genre letter plus a digit (``A1`` .. ``F6``). Within every genre the items are laid
out as a designed conflict, as the maze is: the cheap ones are the popular ones, the rare finds cost
more, and the best rated are neither cheap nor rare, so no single item pleases every persona.
"""

from __future__ import annotations

GENRES = {
    "A": "sci-fi",
    "B": "mystery",
    "C": "romance",
    "D": "history",
    "E": "fantasy",
    "F": "poetry",
}

# per slot within a genre: (price in $, popularity in [0, 1], rating in [2.5, 5]); a genre's items are
# these six profiles, shifted a little per genre so that genres differ
_PROFILES = [
    (8.0, 0.95, 3.4),  # bargain bestseller
    (12.0, 0.80, 3.9),  # cheap and liked
    (25.0, 0.55, 4.8),  # the critics' pick
    (34.0, 0.30, 4.2),  # solid, less known
    (48.0, 0.12, 3.6),  # collector's rarity
    (58.0, 0.05, 4.5),  # rare gem, expensive
]

CATALOG: dict[str, dict] = {}
for g_i, (letter, genre) in enumerate(GENRES.items()):
    for s_i, (price, pop, rating) in enumerate(_PROFILES):
        shift = (g_i - 2.5) / 10.0  # -0.25 .. +0.25
        CATALOG[f"{letter}{s_i + 1}"] = {
            "id": f"{letter}{s_i + 1}",
            "genre": genre,
            "price": round(price * (1.0 + shift / 2), 2),
            "popularity": round(min(1.0, max(0.0, pop + shift / 5)), 3),
            "rating": round(min(5.0, max(2.5, rating - shift / 2)), 2),
        }

MAX_PRICE = 60.0
"""Prices are below this; the budget persona's score reaches 0 there."""


def item(item_id: str) -> dict | None:
    """The catalog entry of an answer (case and surrounding spaces ignored), or None."""
    return CATALOG.get(item_id.strip().upper())
