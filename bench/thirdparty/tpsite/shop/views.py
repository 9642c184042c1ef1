"""The IO-heavy page: a generic ListView whose time is the database's. The top customers by
spend over every order: a join and an aggregate over the whole orders table (no index helps),
rendered as 20 short rows."""

from typing import Any

from django.db.models import F, QuerySet, Sum
from django.views.generic import ListView
from tpsite.shop.models import Customer


class TopCustomers(ListView):  # type: ignore[type-arg]
    template_name = "shop/top_customers.html"
    context_object_name = "customers"

    def get_queryset(self) -> QuerySet[Any]:
        return (
            Customer.objects.annotate(spent=Sum(F("order__quantity") * F("order__unit_price")))
            .order_by("-spent", "id")
            .only("id", "name", "city")[:20]
        )
