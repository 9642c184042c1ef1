"""Run once per cluster (a subprocess of bench/thirdparty's `database()`): create the schema,
load the fixed dataset, make the admin user and log it in. Prints the session cookie's value
on stdout, for the caller to capture: nothing else prints it.

    UWT_PGHOST=/tmp/uwt-pg-... python tpsite/load_data.py ORDERS
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tpsite.settings")

import django

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

CUSTOMERS = 2_000
PRODUCTS = 500
CITIES = 40

# A fixed dataset: every value a function of the row number (no random), so every run and
# every machine loads the same rows.
SEED_SQL = """
INSERT INTO shop_customer (id, name, email, city, joined)
SELECT i, 'Customer ' || i, 'c' || i || '@example.com', 'City ' || (i % {cities}),
       DATE '2020-01-01' + (i * 37 % 1500)::int
FROM generate_series(1::bigint, {customers}) AS i;
INSERT INTO shop_product (id, name, sku, price)
SELECT i, 'Product ' || i, 'SKU-' || lpad(i::text, 6, '0'), 1 + (i * 7919 % 10000) / 100.0
FROM generate_series(1::bigint, {products}) AS i;
INSERT INTO shop_order (id, customer_id, product_id, quantity, unit_price, status, placed, note)
SELECT i, 1 + (i * 7919) % {customers}, 1 + (i * 104729) % {products}, 1 + i % 7,
       1 + (i * 31 % 5000) / 100.0,
       (ARRAY['new', 'paid', 'shipped', 'returned'])[1 + i % 4],
       TIMESTAMPTZ '2024-01-01 00:00:00+00' + (i * 61 % 31536000) * INTERVAL '1 second',
       'note ' || md5(i::text)
FROM generate_series(1::bigint, {orders}) AS i;
SELECT setval(pg_get_serial_sequence('shop_customer', 'id'), {customers});
SELECT setval(pg_get_serial_sequence('shop_product', 'id'), {products});
SELECT setval(pg_get_serial_sequence('shop_order', 'id'), {orders});
"""


def main(orders: int) -> None:
    call_command("migrate", run_syncdb=True, verbosity=0, interactive=False)
    with connection.cursor() as cur:
        cur.execute(
            SEED_SQL.format(customers=CUSTOMERS, products=PRODUCTS, cities=CITIES, orders=orders)
        )
        cur.execute("VACUUM ANALYZE")
    User.objects.create_superuser("bench", "bench@example.com", "bench-password")
    client = Client()
    if not client.login(username="bench", password="bench-password"):
        raise SystemExit("the admin login failed")
    sys.stdout.write(client.cookies["sessionid"].value)


if __name__ == "__main__":
    main(int(sys.argv[1]))
