from typing import ClassVar

from django.db import models


class Customer(models.Model):
    name = models.CharField(max_length=100)
    email = models.EmailField()
    city = models.CharField(max_length=60)
    joined = models.DateField()

    def __str__(self) -> str:
        return self.name


class Product(models.Model):
    name = models.CharField(max_length=100)
    sku = models.CharField(max_length=20)
    price = models.DecimalField(max_digits=10, decimal_places=2)

    def __str__(self) -> str:
        return f"{self.name} ({self.sku})"


class Order(models.Model):
    STATUSES: ClassVar[list[tuple[str, str]]] = [
        ("new", "New"),
        ("paid", "Paid"),
        ("shipped", "Shipped"),
        ("returned", "Returned"),
    ]
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE)
    product = models.ForeignKey(Product, on_delete=models.CASCADE)
    quantity = models.PositiveIntegerField()
    unit_price = models.DecimalField(max_digits=10, decimal_places=2)
    status = models.CharField(max_length=10, choices=STATUSES)
    placed = models.DateTimeField()
    note = models.CharField(max_length=200, blank=True)  # unindexed, as notes are

    def __str__(self) -> str:
        return f"order {self.pk}"
