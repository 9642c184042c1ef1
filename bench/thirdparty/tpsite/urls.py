from django.contrib import admin
from django.urls import path
from tpsite.shop.views import TopCustomers

urlpatterns = [
    path("admin/", admin.site.urls),
    path("report/top-customers/", TopCustomers.as_view()),
]
