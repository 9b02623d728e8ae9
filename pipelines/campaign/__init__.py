"""The campaign after the send, per outreach job: its funnel (``funnel``), the campaign
table and its export (``table``, ``export``), its HTML page (``page``), reminders and
closing (``actions``), the suppression list (``suppress``), all read through ``read``."""

from .actions import ActionReport, UnknownJob, act
from .export import CampaignExportReport, export_campaign
from .funnel import Funnel, funnel
from .read import Campaign, read_campaign, write_page

__all__ = ["ActionReport", "Campaign", "CampaignExportReport", "Funnel", "UnknownJob", "act", "export_campaign",
           "funnel", "read_campaign", "write_page"]
