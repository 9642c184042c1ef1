"""The CPU-heavy page: the admin's change list of orders, 100 rows with related and computed
columns (Django's template rendering is the cost; the queries are an index scan and a count)."""

from decimal import Decimal

from django.contrib import admin
from tpsite.shop.models import Customer, Order, Product


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = (
        "id",
        "customer",
        "customer_city",
        "product",
        "quantity",
        "unit_price",
        "total",
        "status",
        "placed",
        "note",
    )
    list_select_related = ("customer", "product")
    list_filter = ("status",)
    list_per_page = 100
    show_full_result_count = False
    ordering = ("-id",)

    @admin.display(description="City", ordering="customer__city")
    def customer_city(self, obj: Order) -> str:
        return obj.customer.city

    @admin.display(description="Total")
    def total(self, obj: Order) -> Decimal:
        return obj.quantity * obj.unit_price


admin.site.register(Customer)
admin.site.register(Product)
