"""A small inventory API on FastAPI: the OpenAPI document toolrun imports is the one FastAPI
generates from this code (tests/import_fastapi.rs).

usage: app.py   binds 127.0.0.1 on a free port, prints `PORT N` on stdout, serves until killed.
"""

import socket
import sys
from typing import Annotated, Optional

import uvicorn
from fastapi import FastAPI, Header, HTTPException, Query
from pydantic import BaseModel, Field

app = FastAPI(title="Inventory", version="1.0.0", description="Items of a small shop.")


class NewItem(BaseModel):
    name: str = Field(min_length=1, description="What the item is called")
    price: float = Field(gt=0, description="Unit price in euros")
    tags: list[str] = []
    note: Optional[str] = None


class Item(NewItem):
    id: int


ITEMS: dict[int, Item] = {
    1: Item(id=1, name="hammer", price=12.5, tags=["tools", "hand tools"]),
    2: Item(id=2, name="nails (100)", price=3.2, tags=["tools", "small"]),
    3: Item(id=3, name="paint/white", price=20.0, tags=["paint"]),
}


@app.get("/items/{item_id}", response_model=Item)
def read_item(item_id: int):
    """Returns one item by its id."""
    if item_id not in ITEMS:
        raise HTTPException(status_code=404, detail=f"no item {item_id}")
    return ITEMS[item_id]


@app.get("/items", response_model=list[Item])
def list_items(
    tag: Optional[str] = None,
    max_price: Annotated[Optional[float], Query(gt=0)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
):
    """Lists items, optionally only those with a tag or below a price."""
    found = [
        i for i in ITEMS.values()
        if (tag is None or tag in i.tags) and (max_price is None or i.price <= max_price)
    ]
    return found[:limit]


@app.post("/items", response_model=Item, status_code=201)
def create_item(item: NewItem, x_request_id: Annotated[Optional[str], Header()] = None):
    """Adds an item; the optional X-Request-Id header is kept in its note."""
    new = Item(id=max(ITEMS) + 1, **item.model_dump())
    if x_request_id is not None:
        new.note = f"request {x_request_id}"
    ITEMS[new.id] = new
    return new


@app.get("/search/{category}/items")
def search(category: str, q: str):
    """Finds items whose name contains `q` in a category (a tag), echoing what it received."""
    hits = [i.name for i in ITEMS.values() if category in i.tags and q in i.name]
    return {"category": category, "q": q, "hits": hits}


def main():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
